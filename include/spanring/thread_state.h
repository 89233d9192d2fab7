// ThreadState: a producer thread's state, reached from the caller's inlined record path (span.h)
// through one initial-exec TLS pointer, detail::t_self. Not an API: only libspanring and the
// inline code of span.h use it. Its hot fields (up to and including key_memo) and RingWriter's
// are compiled into every program built against these headers, so their layout is part of
// libspanring's ABI (the soname, src/meson.build) and is static_assert'ed below.
//
// Static TLS: this pointer and spanring_vfork_child are all of libspanring's initial-exec TLS
// (16 bytes with alignment), because static TLS is a small budget every dlopen'ed library
// shares (about 1.7 KB in a fresh glibc 2.36 process). Initial-exec rather than general-dynamic:
// a fixed offset from the thread pointer, so the record path never calls __tls_get_addr (which
// may allocate on a thread's first access and is not async-signal-safe). Both are defined with
// protected visibility: a copy of libspanring linked statically into a plugin binds its own
// (and its inline callers') references to its own variables, never to another copy's.
#pragma once

#include <spanring/ring_writer.h>
#include <spanring/segment_layout.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

// Set to 1 by the vfork wrapper (src/vfork_*.S) before the vfork syscall and back to 0 in the
// parent when it resumes. A vfork child shares its parent's memory, TLS included: while this is
// set, records are dropped (counted as vfork_drops) instead of going to the parent's ring.
extern "C" {
extern __attribute__((tls_model("initial-exec"))) __thread uint32_t spanring_vfork_child;
}

namespace spanring {
namespace detail {

// A thread's memo of the key ids of one span shape (Span's record path): the last keys a span
// of name ids = slot (mod kKeyMemoSlots) had, and their ids, so that a span like the last one
// resolves its keys with pointer compares instead of one lookup per key.
// `serial` is the ModuleStrings::serial of the table the ids came from: a module loaded at an
// unloaded one's address has a table with another serial, so its keys never match the old
// module's memo.
struct SPANRING_HIDDEN KeyMemo {
  const char* keys[kCompactAttrs];  // the literal keys, in order (the first `count`)
  uint64_t ids;                     // their string ids, key i in bits 16i..16i+15
  uint32_t count;                   // keys in use; 0: empty
  uint32_t serial;                  // the table's serial when filled (never 0 once filled)
};
inline constexpr uint32_t kKeyMemoSlots = 8;  // 384 bytes per thread, on the heap

// Per-thread producer state. It lives on the heap (a private anonymous mapping, taken from the
// library's pool of states) and is reached through t_self. Zero-filled it is a fresh state with
// no ring. Owner thread only, and its signal handlers (kGateBusy keeps them out of a record write).
struct SPANRING_HIDDEN ThreadState {
  // ---- hot: read and written by the inline record path of span.h
  RingWriter ring;        // this thread's ring; detached until its first record claims one
  uint64_t inv;           // current invocation (Invocation scope)
  uint64_t hid;           // current callable hash
  uint32_t depth;         // Spans open on this thread
  // The thread's gate is ring's (RingWriter::gate_, kGateOpen and the other bits): one word
  // that is exactly kGateOpen when the inline record path may write (a ring claimed, timed by
  // the counter, not busy, not a vfork child, no drop since the last record).
  std::atomic<uint32_t> reentrant_drops;  // records a signal handler dropped while busy
  // An explicit record (emit) whose ts_ns is not above this goes through the library, which
  // may have to announce the process' clock anchor at the clock's origin first (span.cpp,
  // lower_anchor): the anchor's CLOCK_MONOTONIC ns minus 1 while this thread's ring was not
  // told so, -1 once it was (set when the ring is claimed; 0 in a state that never claimed
  // one, whose gate is closed anyway). span.h's ts_announced compares it with the signed
  // ts_ns, which also refuses a negative one. kClosedEarlyNs in the library's closed state
  // (src/attach.cpp), which no ts passes: emit's site test (enter_site_busy) is a
  // compare-and-exchange, which writes the gate word even when it fails, so emit tests ts
  // first and never reaches it on the closed state's read-only memory.
  int64_t early_ns;
  KeyMemo key_memo[kKeyMemoSlots];
  // ---- cold: the library's only
  uint32_t no_ring_wait;  // records to drop before trying to claim a ring again
  uint32_t stash_count;   // open spans copied at fork (prepare handler), for the child's ring
  OpenSpan stash[kOpenSpanMax];
  // set_thread_name(): the name the next ring this thread claims carries instead of the
  // kernel's (prctl); used when name_set is 1. Not NUL-terminated when 16 bytes long.
  uint32_t name_set;
  char name[sizeof(RingHeader::thread_name)];
  // The pool (attach.cpp): every state this copy of the library mapped, linked once, never
  // unlinked; in_use 0 once its thread exited (the next new thread takes it again).
  ThreadState* next_state;
  std::atomic<uint32_t> in_use;
};
// ThreadState::early_ns of the library's closed state: above every ts_ns.
inline constexpr int64_t kClosedEarlyNs = INT64_MAX;
// The inline record path's view of the layout (a change needs a new soname).
static_assert(std::is_standard_layout_v<RingWriter> && sizeof(RingWriter) == 64);
static_assert(std::is_standard_layout_v<ThreadState>);
static_assert(offsetof(ThreadState, inv) == 64 && offsetof(ThreadState, depth) == 80 &&
              offsetof(ThreadState, reentrant_drops) == 84 && offsetof(ThreadState, early_ns) == 88 &&
              offsetof(ThreadState, key_memo) == 96 && sizeof(KeyMemo) == 48);
// The vfork wrappers (src/vfork_x86_64.S, src/vfork_aarch64.S) set and clear kGateVfork at
// this offset from t_self with these values written out.
static_assert(offsetof(ThreadState, ring) + RingWriter::gate_offset() == 56 &&
              kGateVfork == 0x40000);
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
              sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Whether the inline Span and emit paths may write on this thread: the gate is exactly
// kGateOpen (a ring claimed, timed by the counter, not busy, not a vfork child, no drop since
// the last record, a depth a compact record holds: kGateDeep). One load and one compare.
__attribute__((always_inline)) inline bool gate_open(const ThreadState& t) noexcept {
  return t.ring.gate() == kGateOpen;
}

// Whether the text record path (record_any's, the host-span adapter's ordinary records) may
// write on this thread: a ring claimed, not busy, not a vfork child; a drop since the last
// record (an ordinary record carries its whole sequence number), clock_gettime timing and the
// thread's depth (kGateDeep: these records carry the caller's depth whole) do not matter to it. The caller then sets kGateBusy with RingWriter::gate_or (which keeps a
// kGateGap a signal handler sets meanwhile).
__attribute__((always_inline)) inline bool text_gate_open(const ThreadState& t) noexcept {
  return (t.ring.gate() & ~(kGateGap | kGateClock | kGateDeepMask)) == kGateOpen;
}

// Enters a record write on a thread whose gate was just seen open (gate_open): sets kGateBusy
// (signal-atomic, RingWriter::gate_or), then says whether the gate is still exactly open:
// a signal handler of this thread that ran between the caller's test and the busy bit may have
// dropped a record (kGateGap). From here a handler's record is dropped and counted
// (reentrant_drops) and the gate cannot change under the caller. Whatever it returns, the
// caller leaves with release_busy (or release_open_busy when it returned true).
__attribute__((always_inline)) inline bool enter_busy(ThreadState& t) noexcept {
  t.ring.gate_or(kGateBusy);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return t.ring.gate() == (kGateOpen | kGateBusy);
}

// The calling thread's state; never null. Until the thread's first record (or Invocation,
// set_thread_name), and again after its exit handler ran, it points at the library's closed
// state: a zero-filled ThreadState in read-only memory (src/attach.cpp) whose gate is 0, so it
// fails every test of the inline paths (gate_open, text_gate_open, a site word's compare: a
// site word always has kGateOpen) and they take the library's path, which gives the thread a
// state of its own first. So the inline paths test no pointer. Nothing ever writes to it.
// __thread, not thread_local: no TLS wrapper call, the pointer is constant-initialised.
// clang gives an extern variable the visibility of its type unless the declaration names one,
// so a program built with clang++ could not link to libspanring.so (hidden symbol
// 'spanring::detail::t_self' isn't defined): for clang the reference is named default. Not for
// GCC, which builds the library: there the declaration would override the definition's
// protected visibility (attach.cpp).
#if defined(__clang__)
extern __attribute__((tls_model("initial-exec"), visibility("default"))) __thread ThreadState*
    t_self;
#else
extern __attribute__((tls_model("initial-exec"))) __thread ThreadState* t_self;
#endif

// The counter Spans are timed with ("TSC" throughout: kRecordTsc, anchor_tsc). x86-64: the TSC
// (rdtsc). aarch64: the generic timer's virtual count, cntvct_el0, a constant-rate counter the
// architecture requires on every ARMv8 CPU (frequency in cntfrq_el0, typically 24 MHz to 1 GHz),
// the one the kernel's vDSO reads for CLOCK_MONOTONIC. Like rdtsc it is not ordered with the
// instructions around it (no isb: the span's cost stays one read; a read a few instructions
// early or late is below the counter's resolution on most parts). The drainer
// (format/tsc_clock.cpp) measures ticks per ns from (counter, CLOCK_MONOTONIC) pairs on either.
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

// Publishes the kRecordReentrant marker for the records the calling thread's signal handlers
// dropped while its inline record write was busy (reentrant_drops != 0). Async-signal-safe.
// Exported explicitly: a function taking a hidden type would otherwise be hidden too.
__attribute__((visibility("default"))) void flush_reentrant(ThreadState& t) noexcept;

// Whether the thread's signal handlers dropped records while it was busy (reentrant_drops != 0),
// as a relaxed read: the counter is this thread's, the atomic only guards against its handlers.
// x86-64: one `cmpl $0` of the counter in memory with the result from the flags (an aligned
// 4-byte read is one atomic read, as the load is), where GCC makes a relaxed atomic load and its
// test a move and a `test` (as enabled() does for g_segment).
__attribute__((always_inline)) inline bool reentrant_pending(const ThreadState& t) noexcept {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  static_assert(alignof(std::atomic<uint32_t>) == 4);
  bool pending;
  asm volatile("cmpl $0, %1" : "=@ccne"(pending) : "m"(t.reentrant_drops));
  return pending;
#else
  // relaxed: the counter is this thread's; the atomic only guards against its handlers.
  return t.reentrant_drops.load(std::memory_order_relaxed) != 0;
#endif
}

// Ends a record write that set kGateBusy: clears it, then announces what the thread's signal
// handlers dropped meanwhile (flush_reentrant). The compiler barriers keep the slot's stores
// between setting and clearing the bit, as a signal handler on this thread sees them.
__attribute__((always_inline)) inline void release_busy(ThreadState& t) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.ring.gate_clear(kGateBusy);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__builtin_expect(reentrant_pending(t), 0)) flush_reentrant(t);
}

// release_busy after enter_busy returned true and the write published a record that left the
// gate as it was (no drop): the gate goes back to exactly kGateOpen with one store.
__attribute__((always_inline)) inline void release_open_busy(ThreadState& t) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t.ring.set_gate(kGateOpen);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (__builtin_expect(reentrant_pending(t), 0)) flush_reentrant(t);
}

// Enters a record write for a site word `word` (an EmitSite's, span.h: generation << 32 |
// kGateOpen when its record can be compact; every other form has bits no gate has): when the
// thread's gate word (RingWriter::gate_word) is `word` (a ring of the word's generation, the
// gate exactly kGateOpen), sets kGateBusy and returns true, as a compare of the two words
// followed by enter_busy would (the caller leaves with release_busy or release_open_busy);
// else returns false with the gate as it was. x86-64: one signal-atomic cmpxchg of the gate
// word (RingWriter::gate_word_cas), where the site's XOR test and enter_busy's or and compare
// took six instructions with their branches; elsewhere those two steps (a gate seen open but
// changed before the busy bit is released again here). Never on the library's closed state
// (read-only: cmpxchg writes the word back even when it fails): callers test ts_announced
// first, which the closed state's early_ns (kClosedEarlyNs) fails.
__attribute__((always_inline)) inline bool enter_site_busy(ThreadState& t,
                                                           uint64_t word) noexcept {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  // + rather than |: one `lea` (a site word never has kGateBusy's bit, so they are the same).
  return t.ring.gate_word_cas(word, word + kGateBusy);
#else
  if (word != t.ring.gate_word()) return false;
  if (enter_busy(t)) return true;
  release_busy(t);
  return false;
#endif
}

}  // namespace detail
}  // namespace spanring
