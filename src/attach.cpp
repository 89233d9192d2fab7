// The producer's attachment: opening the segment named by SPANRING_SEGMENT, fork and exec,
// and each thread's ring, claimed on its first record and released at thread exit.
#include "src/producer.h"
#include "src/proc.h"

#include <spanring/segment.h>
#include <spanring/span.h>
#include <spanring/test_point.h>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
__attribute__((tls_model("initial-exec"), visibility("hidden"))) __thread uint32_t
    spanring_vfork_child = 0;
}

namespace spanring {

namespace detail {
std::atomic<void*> g_segment{nullptr};
}  // namespace detail

ProcessState g_process;
constinit __attribute__((tls_model("initial-exec"))) thread_local ThreadState t_state{};

void disable(const char* why) noexcept {
  detail::g_segment.store(nullptr, std::memory_order_relaxed);
  // One line, once: the traced program runs on untraced.
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed))
    std::fprintf(stderr, "spanring: tracing disabled: %s\n", why);
}

namespace {

void release_ring(void* ring) noexcept;

// Fork child: the only thread of the child is the forking thread. It must never write into the
// ring it inherited from the parent (the parent's thread still owns it), so it forgets it and
// claims a ring of its own, with the child's pid/tid, on its next record.
// Fork prepare, in the forking thread: copy its open spans, which the child inherits (they end
// in the child too), so the child's ring can describe them if the child is killed.
void on_fork_prepare() noexcept {
  ThreadState& t = t_state;
  t.stash_count = 0;
  RingHeader* ring = t.ring.shared();
  if (ring == nullptr) return;
  uint32_t n = ring->open_depth.load(std::memory_order_relaxed);
  if (n > kOpenSpanMax) n = kOpenSpanMax;
  std::memcpy(t.stash, ring->open, n * sizeof(OpenSpan));
  t.stash_count = n;
}

void on_fork_parent() noexcept { t_state.stash_count = 0; }

void on_fork_child() noexcept {
  ThreadState& t = t_state;
  t.ring.detach();
  t.no_ring_wait = 0;
  t.busy = 0;
  t.reentrant_drops.store(0, std::memory_order_relaxed);
  g_process.pid = static_cast<uint32_t>(::getpid());
  g_process.start_time = process_start_time(g_process.pid);
  // The clock anchor stays the parent's: CLOCK_MONOTONIC is system-wide, and the spans the child
  // inherited began after the parent attached, so they are not before it.
  if (g_process.key_ok) pthread_setspecific(g_process.release_key, nullptr);
}

}  // namespace

bool attach_segment(const char* name) noexcept {
  try {
    Segment seg = Segment::open(name);
    // The geometry as validated once by the segment's view; never read from the header again.
    const SegmentView& view = seg.view();
    ProcessState& p = g_process;
    p.header = &view.header();
    p.rings = &view.ring(0);
    p.slots = view.ring_slots(0);
    p.strings = view.strings();
    p.ring_count = view.ring_count();
    p.ring_capacity = view.ring_capacity();
    p.pid = static_cast<uint32_t>(::getpid());
    p.start_time = process_start_time(p.pid);
    take_anchor(p);
    clear_literal_ids();
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

namespace {

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
  if (t.ring.shared() == ring) t.ring.detach();
  // release: every record this thread published (head) happens-before the drainer's acquire
  // of state == kRingReleased.
  static_cast<RingHeader*>(ring)->state.store(kRingReleased, std::memory_order_release);
}

void copy_thread_name(const ThreadState& t, char* out) noexcept {
  if (t.name_set != 0) {
    std::memcpy(out, t.name, sizeof t.name);
    return;
  }
  char name[17] = {};
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';
  std::memcpy(out, name, 16);
}

}  // namespace

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
    copy_thread_name(t, r.thread_name);
    // Open spans: none, or those a forked child inherited from its parent's thread.
    std::memcpy(r.open, t.stash, t.stash_count * sizeof(OpenSpan));
    r.open_depth.store(t.stash_count != 0 ? t.depth : 0, std::memory_order_relaxed);
    t.stash_count = 0;
    std::byte* slots =
        p.slots + uint64_t{static_cast<uint32_t>(&r - p.rings)} * p.ring_capacity * kSlotBytes;
    // Map this ring's pages into our page tables now: a first store to a shared page costs
    // microseconds, which no later record should pay. Failure only costs that time.
    madvise(slots, uint64_t{p.ring_capacity} * kSlotBytes, MADV_POPULATE_WRITE);
    // The new owner's head, cached tail, sequence and drop counter (drops stored as 0).
    t.ring.attach(&r, slots, p.ring_capacity);
    // release: the owner fields above are visible to the drainer's acquire of kRingActive.
    r.state.store(kRingActive, std::memory_order_release);
    if (p.key_ok) pthread_setspecific(p.release_key, &r);
    return true;
  }
  return false;
}

void set_thread_name(const char* name) noexcept {
  ThreadState& t = t_state;
  std::memset(t.name, 0, sizeof t.name);
  if (name != nullptr) std::memcpy(t.name, name, strnlen(name, sizeof t.name));
  t.name_set = name != nullptr && name[0] != '\0';
}

bool attach(const char* segment_name) noexcept {
  if (segment_name == nullptr || segment_name[0] == '\0') return false;
  return attach_segment(segment_name);
}

}  // namespace spanring
