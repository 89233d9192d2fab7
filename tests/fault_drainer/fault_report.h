// The report page shared by fault_emitter (the traced program of the fault tests) and the test
// that runs it: a small file that both processes map MAP_SHARED. The emitter publishes what it
// has done so far (records emitted and stored per thread, its RSS); the test reads it while the
// emitter runs, to see progress while the drainer is stopped, killed or fed garbage, and tells
// the emitter when to stop.
//
// Plain memory shared by two processes: the counters are lock-free atomics of their plain size,
// written by one side only (noted per field).
#pragma once

#include <atomic>
#include <cstdint>

namespace fault {

// "FRPT": written last by the emitter once `pid` and `threads` are set.
inline constexpr uint32_t kReportMagic = 0x54505246;
// Emitting threads at most (one report line each).
inline constexpr uint32_t kMaxThreads = 16;

// Emitter phases (Report::phase).
inline constexpr uint32_t kPhaseStarting = 0;
inline constexpr uint32_t kPhaseEmitting = 1;  // every thread has emitted its first record
inline constexpr uint32_t kPhaseDone = 2;      // every thread stopped emitting
inline constexpr uint32_t kPhaseExited = 3;    // the JSON is written; the emitter returns 0

// One emitting thread; written by that thread only. One cache line each, so that two threads
// counting flat out do not share a line.
struct alignas(64) ThreadReport {
  std::atomic<uint64_t> emitted;  // emit() calls made = the seq= of the next record
  std::atomic<uint64_t> stored;   // emit() calls that returned true (the record is in the ring)
  std::atomic<uint32_t> tid;      // gettid(), set before the first record
  uint32_t reserved;
};

struct Report {
  std::atomic<uint32_t> magic;         // emitter: kReportMagic once pid/threads are valid
  std::atomic<uint32_t> phase;         // emitter: kPhase*
  std::atomic<uint32_t> pid;           // emitter: getpid()
  std::atomic<uint32_t> threads;       // emitter: emitting threads
  std::atomic<uint32_t> enabled;       // emitter: spanring::enabled() at start (1/0)
  std::atomic<uint32_t> victim_ready;  // emitter: the victim thread stored its records, idles
  std::atomic<uint32_t> stop;          // test: 1 = stop emitting, write the JSON and exit
  std::atomic<uint32_t> reserved0;
  std::atomic<uint64_t> rss_pages;     // emitter's monitor: resident pages (/proc/self/statm)
  std::atomic<uint64_t> rss_samples;   // emitter's monitor: samples taken so far
  alignas(64) ThreadReport t[kMaxThreads];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(ThreadReport) == 64);

}  // namespace fault
