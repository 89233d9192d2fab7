// The producer's internals, shared by its units (not installed):
//   attach.cpp        attaching to the segment, fork/exec, claiming and releasing rings
//   clock_anchor.cpp  the clock: TSC or CLOCK_MONOTONIC, and the process' clock anchor
//   span.cpp          the record path: Span, emit, the thread's record write (hot path)
//   c_api.cpp         the C ABI (include/spanring/spanring.h)
//
// Everything here is hidden (not exported from libspanring), so calls between the units stay
// direct calls, never through the PLT.
#pragma once

#include "src/ring.h"

#include <spanring/segment_layout.h>

#include <pthread.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <atomic>
#include <cstdint>

// Set to 1 by the vfork wrapper (vfork_x86_64.S) before the vfork syscall and back to 0 in the
// parent when it resumes. A vfork child shares its parent's memory, TLS included: while this is
// set, records are dropped (counted as vfork_drops) instead of going to the parent's ring.
extern "C" {
extern __attribute__((tls_model("initial-exec"), visibility("hidden"))) __thread uint32_t
    spanring_vfork_child;
}

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

// A thread's memo of the key ids of one span shape (span.cpp, Span::end): the last keys a span
// of name ids = slot (mod kKeyMemoSlots) had, and their ids, so that a span like the last one
// resolves its keys with pointer compares instead of one lookup per key. `serial` is the
// ModuleStrings::serial of the table the ids came from: a module loaded at an unloaded one's
// address has a table with another serial, so its keys never match the old module's memo.
namespace detail {
struct KeyMemo {
  const char* keys[kCompactAttrs];  // the literal keys, in order
  uint64_t ids;                     // their string ids, key i in bits 16i..16i+15
  uint32_t count;                   // keys in use; 0: empty
  uint32_t serial;                  // the table's serial when filled (never 0 once filled)
};
}  // namespace detail
inline constexpr uint32_t kKeyMemoSlots = 8;  // 384 bytes per thread, on the heap

// Per-thread producer state. It lives on the heap (a private anonymous mapping, taken from
// g_states' pool) and is reached through one initial-exec TLS pointer, t_self: libspanring's
// static TLS is that pointer and spanring_vfork_child (<= 16 bytes), because static TLS is a
// small budget every dlopen'ed library shares (about 1.7 KB in a fresh glibc 2.36 process):
// a 1 KB block here made dlopen of a plugin fail once others had used part of it. Initial-exec
// rather than general-dynamic: a fixed offset from the thread pointer, so the hot path never
// calls __tls_get_addr (which may allocate on a thread's first access, and is not
// async-signal-safe).
struct ThreadState {
  RingWriter ring;        // this thread's ring; detached until its first record claims one
  uint64_t inv;           // current invocation (Invocation scope)
  uint64_t hid;           // current callable hash
  uint32_t depth;         // Spans open on this thread
  uint32_t no_ring_wait;  // records to drop before trying to claim a ring again
  uint32_t busy;          // inside write_record: a signal handler's record must not interleave
  std::atomic<uint32_t> reentrant_drops;  // records a signal handler dropped while busy
  uint32_t stash_count;   // open spans copied at fork (prepare handler), for the child's ring
  OpenSpan stash[kOpenSpanMax];
  // set_thread_name(): the name the next ring this thread claims carries instead of the
  // kernel's (prctl); used when name_set is 1. Not NUL-terminated when 16 bytes long.
  uint32_t name_set;
  char name[sizeof(RingHeader::thread_name)];
  detail::KeyMemo key_memo[kKeyMemoSlots];
  // The pool (attach.cpp): every state this copy of the library mapped, linked once, never
  // unlinked; in_use 0 once its thread exited (the next new thread takes it again).
  ThreadState* next_state;
  std::atomic<uint32_t> in_use;
};
// The calling thread's state; null until its first need (thread_state()). constinit: no TLS
// wrapper call. A forked child inherits the pointer and the (copied) mapping.
extern constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadState* t_self;

// The calling thread's state: t_self, or a state taken from the pool (or mapped: one mmap) on
// the thread's first need; null when no state can be mapped (the caller drops and counts).
// Cold path async-signal-safe (a CAS walk of the pool, mmap, pthread_setspecific of a key
// created at load, so never a second-level allocation).
ThreadState* thread_state_slow() noexcept;
__attribute__((always_inline)) inline ThreadState* thread_state() noexcept {
  ThreadState* t = t_self;
  return __builtin_expect(t != nullptr, 1) ? t : thread_state_slow();
}

// A thread that found every ring taken retries after this many records, so a thread without a
// ring does not scan the ring table on every record.
inline constexpr uint32_t kNoRingRetry = 1024;

// ---- span.cpp

// emit_record() once tracing is known to be enabled: the C ABI's spanring_emit calls it
// directly (a hidden symbol: no call through the PLT, as to the exported emit_record).
bool record_any(const char* name, uint64_t inv, uint64_t hid, int32_t depth, int64_t ts_ns,
                int64_t dur_ns, const char* attrs) noexcept;

// ---- clock_anchor.cpp

// The cycle counter Spans are timed with ("TSC" throughout: kRecordTsc, anchor_tsc). x86-64:
// the TSC (rdtsc). aarch64: the generic timer's virtual count, cntvct_el0, a constant-rate
// counter the architecture requires on every ARMv8 CPU (frequency in cntfrq_el0, typically
// 24 MHz to 1 GHz), the one the kernel's vDSO reads for CLOCK_MONOTONIC. Like rdtsc it is not
// ordered with the instructions around it (no isb: the span's cost stays one read; a read a few
// instructions early or late is below the counter's resolution on most parts). The drainer
// (drain/tsc_clock.cpp) measures ticks per ns from (counter, CLOCK_MONOTONIC) pairs on either.
inline uint64_t read_tsc() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t ticks;
  asm volatile("mrs %0, cntvct_el0" : "=r"(ticks));
  return ticks;
#else
  return 0;
#endif
}

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
