// The producer's internals, shared by its units (not installed):
//   attach.cpp        attaching to the segment, fork/exec, claiming and releasing rings
//   clock_anchor.cpp  the clock: TSC or CLOCK_MONOTONIC, and the process' clock anchor
//   span.cpp          the record path: Span, emit, the thread's record write (hot path)
//   c_api.cpp         the C ABI (include/spanring/spanring.h)
//   id_span.cpp       spans named by ids their caller interned (the Python package; id_span.h)
//
// Everything here is hidden (not exported from libspanring), so calls between the units stay
// direct calls, never through the PLT.
#pragma once

#include "src/ring.h"

#include <spanring/thread_state.h>

#include <spanring/segment_layout.h>
#include <spanring/spanring.h>

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace spanring {

#pragma GCC visibility push(hidden)

// What the process knows about its segment. Written at attach and in the fork child handler,
// before g_segment is published (or while the process has one thread).
struct ProcessState {
  SegmentHeader* header = nullptr;
  RingHeader* rings = nullptr;
  std::byte* slots = nullptr;
  StringEntry* strings = nullptr;  // the segment's string table (kStringTableEntries entries)
  uint32_t ring_count = 0;
  uint32_t ring_capacity = 0;  // slots
  uint32_t pid = 0;
  uint64_t start_time = 0;     // clock ticks since boot
  uint64_t anchor_mono_ns = 0;
  uint64_t anchor_wall_ns = 0;
  uint64_t anchor_tsc = 0;      // TSC at anchor_mono_ns; 0 when Spans are timed by clock_gettime
  uint32_t anchor_origin = 0;   // 1: announce the anchor at the clock's origin (lower_anchor)
  bool use_tsc = false;         // Spans read the TSC (invariant TSC, SPANRING_CLOCK not "monotonic")
  pthread_key_t release_key{};  // thread exit: its destructor returns the thread's state
  bool key_ok = false;          // release_key was created (at load)
};
extern ProcessState g_process;

// The thread's state and its TLS pointer (include/spanring/thread_state.h).
using detail::ThreadState;
using detail::t_self;
using detail::kKeyMemoSlots;
using detail::read_tsc;

// What t_self points at while the thread has no state of its own (thread_state.h): a
// zero-filled state in read-only memory, whose gate (0) is never open, defined in attach.cpp.
// Its address is compared with by name in the vfork wrappers (src/vfork_*.S), which must not
// set kGateVfork in it. Hidden: every copy of the library has its own.
SPANRING_HIDDEN extern const ThreadState g_closed_state;
// Whether `t` (t_self's value) is a state of the thread's own, not the closed state.
__attribute__((always_inline)) inline bool has_state(const ThreadState* t) noexcept {
  return t != &g_closed_state;
}

// The calling thread's state: t_self, or a state taken from the pool (or mapped: one mmap) on
// the thread's first need; null when no state can be mapped (the caller drops and counts).
// Cold path async-signal-safe (a CAS walk of the pool, mmap, pthread_setspecific of a key
// created at load, so never a second-level allocation).
ThreadState* thread_state_slow() noexcept;
__attribute__((always_inline)) inline ThreadState* thread_state() noexcept {
  ThreadState* t = t_self;
  return __builtin_expect(has_state(t), 1) ? t : thread_state_slow();
}

// Sets the thread's depth to `depth` from `old` (what the caller read: a signal handler's spans
// in between leave it as they found it), keeping the gate's kGateDeep count (ring_writer.h): a
// depth past kDepthCompactMax is stored only after kGateDeep was added, and kGateDeep is taken
// away only after a depth of at most kDepthCompactMax was stored, so that no instruction of
// this thread, a signal handler's inline emit included, sees a deep depth with the gate open.
// Every change of ThreadState::depth outside the inline paths (which never cross 255) goes
// through here.
__attribute__((always_inline)) inline void store_depth(ThreadState& t, uint32_t old,
                                                       uint32_t depth) noexcept {
  const bool was_deep = old > kDepthCompactMax;
  const bool deep = depth > kDepthCompactMax;
  if (__builtin_expect(was_deep == deep, 1)) {
    t.depth = depth;
  } else if (deep) {
    t.ring.gate_add(kGateDeep);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the count before the depth
    t.depth = depth;
  } else {
    t.depth = depth;
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the depth before the count
    t.ring.gate_add(0u - kGateDeep);
  }
}

// A thread that found every ring taken retries after this many records, so a thread without a
// ring does not scan the ring table on every record.
inline constexpr uint32_t kNoRingRetry = 1024;

// ---- span.cpp

// The C ABI's spanring_emit once tracing is known to be enabled, and emit_record's path: one
// text record from the caller's struct (a hidden symbol: no call through the PLT). By reference:
// the fields are read after the two string lengths are measured, so none of them is held across
// those calls.
bool record_any(const spanring_span& s) noexcept;

// One ordinary record of a span begun outside Span (id_span.cpp), through the same checks and
// guarded write as a Span's ordinary record (emit_checked): `flags` 0 or kRecordTsc (ts and
// dur in counter ticks); name_len and attrs_len already at most kNameRawMax and kAttrsRawMax,
// attrs raw text. False when dropped (and counted).
bool write_span_record(const char* name, uint32_t name_len, const char* attrs, uint32_t attrs_len,
                       uint64_t inv, uint64_t hid, uint32_t depth, int64_t ts, int64_t dur,
                       uint16_t flags) noexcept;

// ---- clock_anchor.cpp

// read_tsc(): the counter Spans are timed with (thread_state.h).
int64_t clock_ns(clockid_t id) noexcept;

// Reads the process' clock anchor into `p` (anchor_mono_ns, anchor_wall_ns, anchor_tsc) and
// decides whether Spans read the TSC (use_tsc). Cold path: a few clock reads and CPUID.
void take_anchor(ProcessState& p) noexcept;

// ---- attach.cpp

// Turns tracing off for this process with one line on stderr (once).
void disable(const char* why) noexcept;

// Opens `name`, fills g_process and publishes detail::g_segment. False (tracing stays off,
// one line on stderr) when the segment cannot be used.
bool attach_segment(const char* name) noexcept;

// A thread's first record: takes a free ring from the table for `t`. Lock-free (one CAS per
// candidate); may syscall (gettid, prctl, madvise). Async-signal-safe. False when every ring
// is taken.
bool claim_ring(ThreadState& t) noexcept;

#pragma GCC visibility pop

}  // namespace spanring
