// The producer side: attaching to the segment, claiming a ring per thread, writing records.
//
// Hot path (write_record and everything it calls after a thread's first record): no syscall,
// no lock, no allocation; it touches the thread's own ring slots and the producer line of its
// ring header, and reads the drainer's tail only when the ring looks full.
#include <spanring/encode.h>
#include <spanring/segment.h>
#include <spanring/span.h>
#include <spanring/spanring.h>
#include <spanring/test_point.h>

#include <pthread.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace spanring {

namespace detail {
std::atomic<void*> g_segment{nullptr};
}  // namespace detail

namespace {

// What the process knows about its segment. Written at attach and in the fork child handler,
// before g_segment is published (or while the process has one thread).
struct ProcessState {
  SegmentHeader* header = nullptr;
  RingHeader* rings = nullptr;
  std::byte* slots = nullptr;
  uint32_t ring_count = 0;
  uint32_t ring_capacity = 0;  // slots
  uint32_t pid = 0;
  uint64_t start_time = 0;     // clock ticks since boot
  uint64_t anchor_mono_ns = 0;
  uint64_t anchor_wall_ns = 0;
  uint64_t anchor_tsc = 0;      // TSC at anchor_mono_ns; 0 when Spans are timed by clock_gettime
  uint32_t anchor_origin = 0;   // 1: announce the anchor at the clock's origin (lower_anchor)
  bool use_tsc = false;         // Spans read the TSC (invariant TSC, SPANRING_CLOCK not "monotonic")
  pthread_key_t release_key{};
  bool key_ok = false;
};
ProcessState g_process;

// Per-thread producer state. initial-exec TLS: a fixed offset from the thread pointer, so the
// hot path never calls __tls_get_addr (which may allocate on a thread's first access to a
// dlopen'ed library's TLS, and is not async-signal-safe).
struct ThreadState {
  RingHeader* ring;       // null until the thread's first record claims one
  std::byte* slots;       // the ring's first slot
  uint64_t mask;          // ring capacity - 1, slots
  uint64_t head;          // owner's private copy of ring->head
  uint64_t tail_cached;   // last value read from the drainer's tail; reread only when full
  uint64_t seq;           // next record sequence number of this owner
  uint64_t drops;         // owner's private copy of ring->drops
  uint64_t inv;           // current invocation (Invocation scope)
  uint64_t hid;           // current callable hash
  uint32_t depth;         // Spans open on this thread
  uint32_t no_ring_wait;  // records to drop before trying to claim a ring again
  uint32_t busy;          // inside write_record: a signal handler's record must not interleave
  std::atomic<uint32_t> reentrant_drops;  // records a signal handler dropped while busy
  uint32_t stash_count;   // open spans copied at fork (prepare handler), for the child's ring
  OpenSpan stash[kOpenSpanMax];
};
__attribute__((tls_model("initial-exec"))) thread_local ThreadState t_state{};

}  // namespace
}  // namespace spanring

// Set to 1 by the vfork wrapper (vfork_x86_64.S) before the vfork syscall and back to 0 in the
// parent when it resumes. A vfork child shares its parent's memory, TLS included: while this is
// set, records are dropped (counted as vfork_drops) instead of going to the parent's ring.
extern "C" {
__attribute__((tls_model("initial-exec"), visibility("hidden"))) __thread uint32_t
    spanring_vfork_child = 0;
}

namespace spanring {
namespace {

// A thread that found every ring taken retries after this many records, so a thread without a
// ring does not scan the ring table on every record.
constexpr uint32_t kNoRingRetry = 1024;

// How far ahead of head write_record prefetches slots for writing: 16 slots (1 KiB, a few
// records), far enough that a line taken back from the drainer's core (~100 ns) arrives before
// the record that needs it. In a ring of kMinRingCapacity slots it wraps onto the slots just
// written, which costs nothing.
constexpr uint32_t kPrefetchSlots = 16;

inline uint64_t read_tsc() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

int64_t clock_ns(clockid_t id) noexcept {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Whether the CPU's TSC runs at a constant rate in every state (CPUID 0x80000007 EDX bit 8,
// "invariant TSC", the same bit on Intel and AMD), so that ticks convert linearly to
// CLOCK_MONOTONIC. SPANRING_CLOCK=monotonic forces clock_gettime.
bool invariant_tsc() noexcept {
#if defined(__x86_64__)
  const char* clock = std::getenv("SPANRING_CLOCK");
  if (clock != nullptr && std::strcmp(clock, "monotonic") == 0) return false;
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) == 0 || a < 0x80000007) return false;
  __get_cpuid(0x80000007, &a, &b, &c, &d);
  return (d & (1u << 8)) != 0;
#else
  return false;
#endif
}

void take_anchor(ProcessState& p) noexcept {
  // Read CLOCK_MONOTONIC around CLOCK_REALTIME and pair the realtime reading with the midpoint.
  // The first clock reads of a process may fault in the vDSO's pages (microseconds): these
  // reads come after the warm-up of the first one.
  clock_ns(CLOCK_REALTIME);
  const int64_t m0 = clock_ns(CLOCK_MONOTONIC);
  const int64_t w = clock_ns(CLOCK_REALTIME);
  const int64_t m1 = clock_ns(CLOCK_MONOTONIC);
  p.anchor_mono_ns = static_cast<uint64_t>(m0 + (m1 - m0) / 2);
  p.anchor_wall_ns = static_cast<uint64_t>(w);
  p.use_tsc = invariant_tsc();
  p.anchor_tsc = 0;
  if (p.use_tsc) {
    // The TSC read around CLOCK_MONOTONIC, five times; the try with the closest TSC reads (the
    // least disturbed by an interrupt) gives the pair (midpoint of its TSC reads, its mono).
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 5; ++i) {
      const uint64_t t0 = read_tsc();
      const int64_t m = clock_ns(CLOCK_MONOTONIC);
      const uint64_t t1 = read_tsc();
      if (t1 - t0 < best_gap) {
        best_gap = t1 - t0;
        p.anchor_tsc = t0 + (t1 - t0) / 2;
        // The anchor moves to this read of the monotonic clock, keeping its wall - mono offset.
        p.anchor_wall_ns = static_cast<uint64_t>(w + (m - (m0 + (m1 - m0) / 2)));
        p.anchor_mono_ns = static_cast<uint64_t>(m);
      }
    }
  }
  p.anchor_origin = 0;
}

void disable(const char* why) noexcept {
  detail::g_segment.store(nullptr, std::memory_order_relaxed);
  // One line, once: the traced program runs on untraced.
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed))
    std::fprintf(stderr, "spanring: tracing disabled: %s\n", why);
}

void release_ring(void* ring) noexcept;

// Fork child: the only thread of the child is the forking thread. It must never write into the
// ring it inherited from the parent (the parent's thread still owns it), so it forgets it and
// claims a ring of its own, with the child's pid/tid, on its next record.
// Fork prepare, in the forking thread: copy its open spans, which the child inherits (they end
// in the child too), so the child's ring can describe them if the child is killed.
void on_fork_prepare() noexcept {
  ThreadState& t = t_state;
  t.stash_count = 0;
  if (t.ring == nullptr) return;
  uint32_t n = t.ring->open_depth.load(std::memory_order_relaxed);
  if (n > kOpenSpanMax) n = kOpenSpanMax;
  std::memcpy(t.stash, t.ring->open, n * sizeof(OpenSpan));
  t.stash_count = n;
}

void on_fork_parent() noexcept { t_state.stash_count = 0; }

void on_fork_child() noexcept {
  ThreadState& t = t_state;
  t.ring = nullptr;
  t.no_ring_wait = 0;
  t.busy = 0;
  t.reentrant_drops.store(0, std::memory_order_relaxed);
  g_process.pid = static_cast<uint32_t>(::getpid());
  g_process.start_time = process_start_time(g_process.pid);
  // The clock anchor stays the parent's: CLOCK_MONOTONIC is system-wide, and the spans the child
  // inherited began after the parent attached, so they are not before it.
  if (g_process.key_ok) pthread_setspecific(g_process.release_key, nullptr);
}

bool attach_segment(const char* name) noexcept {
  try {
    Segment seg = Segment::open(name);
    ProcessState& p = g_process;
    p.header = &seg.header();
    p.rings = &seg.ring(0);
    p.slots = seg.ring_slots(0);
    p.ring_count = seg.ring_count();
    p.ring_capacity = seg.ring_capacity();
    p.pid = static_cast<uint32_t>(::getpid());
    p.start_time = process_start_time(p.pid);
    take_anchor(p);
    if (!p.key_ok) p.key_ok = pthread_key_create(&p.release_key, release_ring) == 0;
    static bool atfork_done = false;
    if (!atfork_done)
      atfork_done = pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child) == 0;
    void* base = seg.base();
    seg.leak();  // never unmapped: threads may still emit while the process exits
    // release: the ProcessState fields above are visible to any thread that sees non-null.
    detail::g_segment.store(base, std::memory_order_release);
    return true;
  } catch (const std::exception& e) {
    disable(e.what());
  } catch (...) {
    disable("unknown error while attaching");
  }
  return false;
}

// exec() keeps the pid (and its start time) but ends every thread of the old image, which
// never released its rings. At load, before any thread of this image claims one, hand those
// rings to the drainer as released so they are drained and freed now, not when the pid exits.
void release_rings_of_previous_image() noexcept {
  const ProcessState& p = g_process;
  for (uint32_t i = 0; i < p.ring_count; ++i) {
    RingHeader& r = p.rings[i];
    if (r.state.load(std::memory_order_acquire) == kRingActive && r.owner_pid == p.pid &&
        r.owner_start_time == p.start_time) {
      uint32_t expected = kRingActive;
      // release: the old image's last head happens-before the drainer's acquire of the state.
      r.state.compare_exchange_strong(expected, kRingReleased, std::memory_order_release,
                                      std::memory_order_relaxed);
    }
  }
}

__attribute__((constructor)) void attach_from_environment() {
  const char* name = std::getenv("SPANRING_SEGMENT");
  if (name != nullptr && name[0] != '\0' && attach_segment(name))
    release_rings_of_previous_image();
}

// Thread exit (pthread key destructor): hand the ring to the drainer, which drains and frees it.
void release_ring(void* ring) noexcept {
  ThreadState& t = t_state;
  if (t.ring == ring) t.ring = nullptr;
  // release: every record this thread published (head) happens-before the drainer's acquire
  // of state == kRingReleased.
  static_cast<RingHeader*>(ring)->state.store(kRingReleased, std::memory_order_release);
}

void copy_thread_name(char* out) noexcept {
  char name[17] = {};
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';
  std::memcpy(out, name, 16);
}

// A thread's first record: take a free ring from the table. Lock-free (one CAS per candidate);
// may syscall (gettid, prctl, madvise). Async-signal-safe.
bool claim_ring(ThreadState& t) noexcept {
  const ProcessState& p = g_process;
  const uint32_t tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  for (uint32_t i = 0; i < p.ring_count; ++i) {
    // Start at a slot derived from the tid so that threads starting together rarely collide.
    RingHeader& r = p.rings[(tid + i) % p.ring_count];
    uint32_t expected = kRingFree;
    // relaxed pre-check avoids dirtying the cache line of rings in use.
    if (r.state.load(std::memory_order_relaxed) != kRingFree) continue;
    // acquire: pairs with the drainer's release of kRingFree, after which it no longer reads
    // this ring and has stored tail == head.
    if (!r.state.compare_exchange_strong(expected, kRingClaiming, std::memory_order_acquire,
                                         std::memory_order_relaxed))
      continue;
    SPANRING_TEST_POINT("producer_claim_started");
    r.owner_pid = p.pid;
    r.owner_tid = tid;
    r.generation += 1;
    r.owner_start_time = p.start_time;
    r.anchor_mono_ns = p.anchor_mono_ns;
    r.anchor_wall_ns = p.anchor_wall_ns;
    r.anchor_tsc = p.anchor_tsc;
    // relaxed: lower_anchor() may set the process' flag concurrently; the record that needs it
    // sets the ring's too.
    r.anchor_origin.store(std::atomic_ref(g_process.anchor_origin).load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
    copy_thread_name(r.thread_name);
    // relaxed: both written before the drainer's kRingFree release, which our CAS acquired.
    t.head = r.head.load(std::memory_order_relaxed);
    t.tail_cached = r.tail.load(std::memory_order_relaxed);
    r.drops.store(0, std::memory_order_relaxed);
    // Open spans: none, or those a forked child inherited from its parent's thread.
    std::memcpy(r.open, t.stash, t.stash_count * sizeof(OpenSpan));
    r.open_depth.store(t.stash_count != 0 ? t.depth : 0, std::memory_order_relaxed);
    t.stash_count = 0;
    t.drops = 0;
    t.seq = 0;
    t.mask = p.ring_capacity - 1;
    t.slots = p.slots + uint64_t{static_cast<uint32_t>(&r - p.rings)} * p.ring_capacity * kSlotBytes;
    // Map this ring's pages into our page tables now: a first store to a shared page costs
    // microseconds, which no later record should pay. Failure only costs that time.
    madvise(t.slots, uint64_t{p.ring_capacity} * kSlotBytes, MADV_POPULATE_WRITE);
    // release: the owner fields above are visible to the drainer's acquire of kRingActive.
    r.state.store(kRingActive, std::memory_order_release);
    t.ring = &r;
    if (p.key_ok) pthread_setspecific(p.release_key, &r);
    return true;
  }
  return false;
}

// Copies n <= 32 bytes inline, with two (overlapping) moves of one size class: the open-span
// note of every Span would otherwise pay a call into memcpy.
inline void copy_small(char* dst, const char* src, uint32_t n) noexcept {
  if (n >= 16) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n != 0) {
    dst[0] = src[0];
    dst[n / 2] = src[n / 2];
    dst[n - 1] = src[n - 1];
  }
}

// Copies n bytes inline: 32-byte moves and an overlapping last one (a record's payload is at
// most kNameRawMax + kAttrsPackedMax bytes; a call into memcpy costs more than the copy here).
inline void copy_bytes(char* dst, const char* src, uint32_t n) noexcept {
  if (n <= 32) {
    copy_small(dst, src, n);
    return;
  }
  for (uint32_t i = 0; i + 32 < n; i += 32) std::memcpy(dst + i, src + i, 32);
  std::memcpy(dst + n - 32, src + n - 32, 32);
}

// Copies `len` payload bytes to stream position `pos` of the record whose first slot is `first`
// (positions 0..11 are the first slot's payload, then 64 bytes per following slot, wrapping).
// Only for a record that wraps around the ring's end; write_record copies others in one piece.
static_assert(offsetof(RecordHeader, payload) + kInlinePayloadBytes == kSlotBytes,
              "the inline payload ends where the next slot begins");
void put_payload(const ThreadState& t, uint64_t first, uint32_t pos, const char* src,
                 uint32_t len) noexcept {
  while (len > 0) {
    std::byte* dst;
    uint32_t room;
    if (pos < kInlinePayloadBytes) {
      auto* hdr = reinterpret_cast<RecordHeader*>(t.slots + (first & t.mask) * kSlotBytes);
      dst = reinterpret_cast<std::byte*>(hdr->payload) + pos;
      room = kInlinePayloadBytes - pos;
    } else {
      const uint32_t q = pos - kInlinePayloadBytes;
      dst = t.slots + ((first + 1 + q / kSlotBytes) & t.mask) * kSlotBytes + q % kSlotBytes;
      room = kSlotBytes - q % kSlotBytes;
    }
    const uint32_t n = len < room ? len : room;
    std::memcpy(dst, src, n);
    src += n;
    pos += n;
    len -= n;
  }
}

// Whether `need` slots are free in the owner's ring; rereads the drainer's tail only when the
// cached one says the ring is full, so the producer touches the drainer's cache line rarely.
bool has_room(ThreadState& t, uint32_t need) noexcept {
  const uint64_t cap = t.mask + 1;
  if (t.head + need - t.tail_cached <= cap) return true;
  // acquire: pairs with the drainer's release of tail, made after it finished reading the
  // slots below tail, so our writes to them cannot race its reads.
  t.tail_cached = t.ring->tail.load(std::memory_order_acquire);
  return t.head + need - t.tail_cached <= cap;
}

// `n` records found the ring full.
void count_drops(ThreadState& t, uint32_t n) noexcept {
  t.seq += n;  // the dropped records' sequence numbers are never published: a gap
  t.drops += n;
  // release: the drainer pairs its acquire of drops with its acquire of head to attribute the
  // gap; only the owner writes drops, so a store of the private copy suffices.
  t.ring->drops.store(t.drops, std::memory_order_release);
}

// Publishes a kRecordReentrant marker for `n` records a signal handler emitted while this thread
// was inside write_record; when the ring is full they are ring_full drops instead.
void publish_reentrant_marker(ThreadState& t, uint32_t n) noexcept {
  if (!has_room(t, 1)) {
    count_drops(t, n);
    return;
  }
  auto* rec = reinterpret_cast<RecordHeader*>(t.slots + (t.head & t.mask) * kSlotBytes);
  rec->seq = t.seq;
  rec->ts_ns = 0;
  rec->dur_ns = n;
  rec->inv = 0;
  rec->hid = 0;
  rec->depth = 0;
  rec->name_len = 0;
  rec->attrs_len = 0;
  rec->slots = 1;
  rec->flags = kRecordReentrant;
  t.head += 1;
  t.seq += n;
  // release: the marker's bytes are visible to the drainer's acquire of head.
  t.ring->head.store(t.head, std::memory_order_release);
}

// Writes one record into the calling thread's ring. name_len/attrs_len are already bounded to
// kNameRawMax and kAttrsRawMax (kAttrsPackedMax for kRecordPackedAttrs). Returns false when the record was dropped.
bool write_record(const char* name, uint32_t name_len, const char* attrs, uint32_t attrs_len,
                  uint64_t ts, uint64_t dur, uint64_t inv, uint64_t hid, uint32_t depth,
                  uint16_t flags) noexcept {
  ThreadState& t = t_state;
  if (t.busy | spanring_vfork_child) {
    if (spanring_vfork_child) {
      // relaxed: a report counter.
      g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    // A signal handler interrupted this thread inside write_record: the ring is SPSC and the
    // interrupted writer owns the slots, so this record is dropped; the interrupted writer
    // publishes a kRecordReentrant marker for it when it finishes.
    t.reentrant_drops.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  t.busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // busy is set before any slot write
  bool stored = false;
  if (t.ring == nullptr) {
    if (t.no_ring_wait > 0 || !claim_ring(t)) {
      if (t.no_ring_wait == 0) t.no_ring_wait = kNoRingRetry;
      --t.no_ring_wait;
      // relaxed: a report counter with no ordering to other data.
      g_process.header->no_ring_drops.fetch_add(1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      t.busy = 0;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (t.reentrant_drops.load(std::memory_order_relaxed) != 0)
        g_process.header->no_ring_drops.fetch_add(
            t.reentrant_drops.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
      return false;
    }
  }
  const uint32_t payload = name_len + attrs_len;
  const uint32_t need = record_slots(payload);
  if (!has_room(t, need)) {
    count_drops(t, 1);
  } else {
    auto* rec = reinterpret_cast<RecordHeader*>(t.slots + (t.head & t.mask) * kSlotBytes);
    rec->seq = t.seq;
    rec->ts_ns = ts;
    rec->dur_ns = dur;
    rec->inv = inv;
    rec->hid = hid;
    rec->depth = depth;
    rec->name_len = static_cast<uint16_t>(name_len);
    rec->attrs_len = static_cast<uint16_t>(attrs_len);
    rec->slots = static_cast<uint16_t>(need);
    rec->flags = flags;
    if ((t.head & t.mask) + need <= t.mask + 1) {
      // The record does not wrap: its payload is contiguous, from the header's payload field
      // (the last kInlinePayloadBytes of the first slot) into the slots that follow.
      // (Addressed from the slot bytes, not from the 12-byte member, which it runs past.)
      auto* dst = reinterpret_cast<char*>(t.slots + (t.head & t.mask) * kSlotBytes +
                                          offsetof(RecordHeader, payload));
      // (An invalid-record marker has no name: copy_bytes reads nothing for n == 0.)
      copy_bytes(dst, name, name_len);
      copy_bytes(dst + name_len, attrs, attrs_len);
    } else {
      put_payload(t, t.head, 0, name, name_len);
      put_payload(t, t.head, name_len, attrs, attrs_len);
    }
    t.head += need;
    t.seq += 1;
    // release: the record's bytes are visible to the drainer's acquire of head.
    t.ring->head.store(t.head, std::memory_order_release);
    stored = true;
    // Fetch for writing, kPrefetchSlots ahead, as many slots as this record used: the drainer
    // read each slot line on the ring's last lap, so a store to it must first take the line back
    // from the drainer's core (an RFO, ~100 ns here). Prefetched this far ahead, it is back in
    // this core's cache by the time a record lands on it, also after a pause between records.
    for (uint32_t i = 0; i < need; ++i)
      __builtin_prefetch(t.slots + ((t.head + kPrefetchSlots + i) & t.mask) * kSlotBytes, 1);
  }
  // Records our own signal handlers refused meanwhile get a marker, written while still busy; a
  // handler that runs between the last check and busy = 0 is caught by the check after it.
  // relaxed: the counter is thread-local; the atomic only guards against our own handlers.
  // (A plain load first: the exchange is a locked instruction, too dear for every record.)
  for (;;) {
    if (t.reentrant_drops.load(std::memory_order_relaxed) != 0)
      publish_reentrant_marker(t, t.reentrant_drops.exchange(0, std::memory_order_relaxed));
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.busy = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (t.reentrant_drops.load(std::memory_order_relaxed) == 0) break;
    t.busy = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  return stored;
}

// A caller-supplied start before the process' clock anchor (a span begun before attach, or a
// timestamp taken elsewhere): [STRACE] consumers convert ts to wall time only from the anchor on,
// and later explicit records may start earlier still. So the process' anchor is announced at the
// clock's origin, (mono 0, wall - mono): the same offset, before every host timestamp. The flag
// goes to the process and to the caller's ring before the record is published, so the drainer,
// which announces a process when it reads its first record, sees it. Device spans (clk=dev) are
// on another clock and never move it.
void lower_anchor(const char* attrs, uint32_t attrs_len) noexcept {
  if (attrs != nullptr && is_device_attrs(std::string_view(attrs, attrs_len))) return;
  // relaxed: the record's release of head orders the ring's flag for the drainer.
  std::atomic_ref(g_process.anchor_origin).store(1, std::memory_order_relaxed);
  if (RingHeader* r = t_state.ring) r->anchor_origin.store(1, std::memory_order_relaxed);
}

// Whether an explicit record starting at ts_ns must move the anchor (see lower_anchor).
inline bool before_anchor(int64_t ts_ns) noexcept {
  // relaxed: a flag this process only ever sets; a stale 0 costs one redundant store.
  return ts_ns >= 0 && static_cast<uint64_t>(ts_ns) < g_process.anchor_mono_ns &&
         std::atomic_ref(g_process.anchor_origin).load(std::memory_order_relaxed) == 0;
}

uint32_t bounded_len(const char* s, uint32_t max) noexcept {
  return s == nullptr ? 0 : static_cast<uint32_t>(strnlen(s, max));
}

// flags: 0 or kRecordTsc (ts and dur in TSC ticks).
bool emit_checked(const char* name, uint32_t name_len, uint64_t inv, uint64_t hid, int64_t depth,
                  int64_t ts, int64_t dur, const char* attrs, uint32_t attrs_len,
                  uint16_t flags = 0) noexcept {
  if (name_len == 0 || ts < 0 || dur < 0 || depth < 0) {
    // A [STRACE] consumer silently drops empty names and negative numbers: publish a drop
    // marker instead, so the loss is reported with its reason.
    write_record(nullptr, 0, nullptr, 0, 0, 0, inv, hid, 0, kRecordInvalid);
    return false;
  }
  return write_record(name, name_len, attrs, attrs_len, static_cast<uint64_t>(ts),
                      static_cast<uint64_t>(dur), inv, hid, static_cast<uint32_t>(depth), flags);
}

}  // namespace

int64_t now_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }

bool attach(const char* segment_name) noexcept {
  if (segment_name == nullptr || segment_name[0] == '\0') return false;
  return attach_segment(segment_name);
}

bool emit_record(const char* name, uint64_t inv, uint64_t hid, int32_t depth, int64_t ts_ns,
                 int64_t dur_ns, const char* attrs) noexcept {
  if (!enabled()) return false;
  const uint32_t attrs_len = bounded_len(attrs, kAttrsRawMax);
  if (before_anchor(ts_ns)) lower_anchor(attrs, attrs_len);
  return emit_checked(name, bounded_len(name, kNameRawMax), inv, hid, depth, ts_ns, dur_ns, attrs,
                      attrs_len);
}

bool emit(const char* name, int64_t ts_ns, int64_t dur_ns, const char* attrs) noexcept {
  if (!enabled()) return false;
  const ThreadState& t = t_state;
  const uint32_t attrs_len = bounded_len(attrs, kAttrsRawMax);
  if (before_anchor(ts_ns)) lower_anchor(attrs, attrs_len);
  return emit_checked(name, bounded_len(name, kNameRawMax), t.inv, t.hid, t.depth, ts_ns, dur_ns,
                      attrs, attrs_len);
}

Invocation::Invocation(uint64_t inv, uint64_t hid) noexcept {
  ThreadState& t = t_state;
  saved_inv_ = t.inv;
  saved_hid_ = t.hid;
  t.inv = inv;
  t.hid = hid;
}

Invocation::~Invocation() {
  ThreadState& t = t_state;
  t.inv = saved_inv_;
  t.hid = saved_hid_;
}

void Span::begin(const char* name, size_t name_len) noexcept {
  if (spanring_vfork_child) {
    // A vfork child must not touch its parent's ring or depth (it shares the parent's memory).
    g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
    return;  // name_ stays null: the span is inactive
  }
  ThreadState& t = t_state;
  name_ = name != nullptr ? name : "";  // an empty name is reported as an invalid record
  if (name_len == kNameLenUnknown || name == nullptr) name_len = strnlen(name_, kNameRawMax);
  name_len_ = static_cast<uint16_t>(name_len < kNameRawMax ? name_len : kNameRawMax);
  depth_ = t.depth++;
  inv_ = t.inv;
  hid_ = t.hid;
  attrs_len_ = 0;
  packed_ = true;
  tsc_ = g_process.use_tsc;
  start_ = tsc_ ? static_cast<int64_t>(read_tsc()) : now_ns();
  if (t.ring == nullptr && t.busy == 0 && t.no_ring_wait == 0) {
    // The thread's first record-to-be claims its ring now, so that this span is described in
    // the ring's open-span stack if the process dies before it ends.
    t.busy = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!claim_ring(t)) t.no_ring_wait = kNoRingRetry;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.busy = 0;
  }
  if (t.ring != nullptr && depth_ < kOpenSpanMax) {
    OpenSpan& o = t.ring->open[depth_];
    const uint32_t n = name_len_;
    o.ts_ns = static_cast<uint64_t>(start_);
    o.inv = inv_;
    o.hid = hid_;
    o.depth = depth_;
    o.name_len = static_cast<uint16_t>(n < kOpenNameBytes ? n : kOpenNameBytes);
    o.name_cut = n > kOpenNameBytes;
    o.tsc = tsc_;
    copy_small(o.name, name_, o.name_len);
  }
  if (t.ring != nullptr) {
    // relaxed: read by the drainer only once this process is dead.
    t.ring->open_depth.store(depth_ + 1, std::memory_order_relaxed);
  }
}

void Span::end() noexcept {
  const int64_t end = tsc_ ? static_cast<int64_t>(read_tsc()) : now_ns();
  ThreadState& t = t_state;
  t.depth -= 1;
  // TSC ticks of two CPUs can differ by a few ticks on some hosts: never a negative duration.
  emit_checked(name_, name_len_, inv_, hid_, depth_, start_, end > start_ ? end - start_ : 0,
               attrs_, attrs_len_,
               static_cast<uint16_t>((tsc_ ? kRecordTsc : 0) |
                                     (packed_ && attrs_len_ != 0 ? kRecordPackedAttrs : 0)));
  // After the record is published: a process killed in between reports the span both written
  // and open, which the drainer recognises (the last record has its ts and depth); lowering the
  // depth first would lose it silently.
  if (t.ring != nullptr && spanring_vfork_child == 0)
    t.ring->open_depth.store(depth_, std::memory_order_relaxed);
}

void Span::append(std::string_view text) noexcept {
  // Keep at most kAttrsRawMax raw bytes: one byte past the encoded cap tells the drainer the
  // attributes went on, so it cuts them with `~` exactly as the [STRACE] spec says.
  const size_t room = kAttrsRawMax - attrs_len_;
  const size_t n = text.size() < room ? text.size() : room;
  std::memcpy(attrs_ + attrs_len_, text.data(), n);
  attrs_len_ = static_cast<uint16_t>(attrs_len_ + n);
}

// The packed tokens become the text they stand for, and the span goes on in text.
void Span::unpack() noexcept {
  char packed[kAttrsPackedMax];
  std::memcpy(packed, attrs_, attrs_len_);
  // A list this Span packed is well-formed: unpack_attrs cannot fail here.
  const int32_t n = unpack_attrs(packed, attrs_len_, attrs_, kAttrsRawMax);
  attrs_len_ = static_cast<uint16_t>(n > 0 ? n : 0);
  packed_ = false;
}

// An integer attribute the inline attr() could not pack (its check assumes 8 value bytes): packed
// when the token still fits exactly, else as text after unpacking, cut at the limit.
void Span::append_number(std::string_view key, bool negative, uint64_t magnitude) noexcept {
  if (packed_) {
    if (key.size() <= kAttrsRawMax && attrs_len_ + kPackedTokenFixed + key.size() +
                                              packed_value_bytes(magnitude) <= kAttrsPackedMax) {
      char token[kPackedTokenFixed + kAttrsRawMax + 8];  // pack_token stores 8 value bytes
      const uint32_t n = pack_token(token, key.data(), static_cast<uint32_t>(key.size()),
                                    negative ? kPackedNegative : kPackedUnsigned, magnitude);
      std::memcpy(attrs_ + attrs_len_, token, n);
      attrs_len_ = static_cast<uint16_t>(attrs_len_ + n);
      return;
    }
    unpack();
  }
  char buf[22];  // "=-" and 20 digits
  char* p = buf;
  *p++ = '=';
  if (negative) *p++ = '-';
  p = std::to_chars(p, buf + sizeof buf, magnitude).ptr;
  if (attrs_len_ != 0) append(" ");
  append(key);
  append({buf, static_cast<size_t>(p - buf)});
}

void Span::append_uint(std::string_view key, uint64_t value) noexcept {
  append_number(key, false, value);
}

void Span::append_int(std::string_view key, int64_t value) noexcept {
  // 0 - magnitude is well-defined for INT64_MIN.
  append_number(key, value < 0,
                value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value));
}

void Span::append_text(std::string_view key, std::string_view value) noexcept {
  if (packed_) unpack();
  if (attrs_len_ != 0) append(" ");
  append(key);
  append("=");
  append(value);
}

}  // namespace spanring

// ---- C ABI (include/spanring/spanring.h) ----

extern "C" void spanring_emit(const spanring_span* span) {
  if (span == nullptr || !spanring::enabled()) return;
  spanring::emit_record(span->name, span->invocation_id, span->callable_hash, span->depth,
                        span->timestamp_ns, span->duration_ns, span->attributes);
}

extern "C" int spanring_enabled(void) { return spanring::enabled() ? 1 : 0; }

extern "C" int64_t spanring_now_ns(void) { return spanring::now_ns(); }

// The vfork wrapper's error path: errno from the failed syscall, -1 to the caller.
extern "C" __attribute__((visibility("hidden"))) int spanring_vfork_failed(long err) {
  errno = static_cast<int>(err);
  return -1;
}
