// The producer's attachment: opening the segment named by SPANRING_SEGMENT, fork and exec,
// and each thread's ring, claimed on its first record and released at thread exit.
#include "src/producer.h"
#include "src/proc.h"

#include <spanring/segment.h>
#include <spanring/span.h>
#include <spanring/test_point.h>

#include <linux/futex.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <type_traits>

// Protected: exported for the callers' inline record path (thread_state.h), but this copy's own
// references (and those of code linked with libspanring.a into the same module) bind to this
// copy's variable, never to another copy of the library loaded in the process.
extern "C" {
__attribute__((tls_model("initial-exec"), visibility("protected"))) __thread uint32_t
    spanring_vfork_child = 0;
}

namespace spanring {

namespace detail {
std::atomic<void*> g_segment{nullptr};
std::atomic<uint32_t> g_attach_generation{0};
}  // namespace detail

ProcessState g_process;
// Constant-initialised and const: in read-only memory, so a write to it faults instead of
// opening a gate every stateless thread shares. Zero but for early_ns (kClosedEarlyNs: no
// explicit record passes ts_announced, so emit's compare-and-exchange never runs on it).
constinit const ThreadState g_closed_state{.ring = {},
                                           .inv = 0,
                                           .hid = 0,
                                           .depth = 0,
                                           .reentrant_drops = {},
                                           .early_ns = detail::kClosedEarlyNs,
                                           .key_memo = {},
                                           .no_ring_wait = 0,
                                           .stash_count = 0,
                                           .stash = {},
                                           .name_set = 0,
                                           .name = {},
                                           .next_state = nullptr,
                                           .in_use = {}};
namespace detail {
// const_cast: t_self is a ThreadState* for the states threads own; through the closed state it
// is only read (its gate fails every test before a write, and the library tests has_state).
__attribute__((tls_model("initial-exec"), visibility("protected"))) __thread ThreadState* t_self =
    const_cast<ThreadState*>(&g_closed_state);
}  // namespace detail

namespace {

// Every thread state this copy of the library mapped (ThreadState::next_state), newest first.
// States are never unmapped while the library is loaded (a signal handler of an exiting thread
// may still hold one), only marked free and handed to the next new thread, so the list only
// grows by push and a walk never meets freed memory.
std::atomic<ThreadState*> g_states{nullptr};

}  // namespace

ThreadState* thread_state_slow() noexcept {
  ThreadState* t = nullptr;
  // acquire: pairs with the push's release (the state's next_state is written before).
  for (ThreadState* s = g_states.load(std::memory_order_acquire); s != nullptr;
       s = s->next_state) {
    uint32_t free_state = 0;
    // acquire: pairs with the exiting thread's release of in_use (its last writes to the
    // state happen before ours).
    if (s->in_use.load(std::memory_order_relaxed) == 0 &&
        s->in_use.compare_exchange_strong(free_state, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
      t = s;
      break;
    }
  }
  if (t == nullptr) {
    // mmap, not malloc: this may run in a signal handler (a thread's first record).
    void* m = mmap(nullptr, sizeof(ThreadState), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    t = static_cast<ThreadState*>(m);  // zero-filled: every field starts 0 / detached
    t->in_use.store(1, std::memory_order_relaxed);
    ThreadState* head = g_states.load(std::memory_order_relaxed);
    do {
      t->next_state = head;
      // release: next_state (and the state's zeros) before any walker sees t.
    } while (!g_states.compare_exchange_weak(head, t, std::memory_order_release,
                                             std::memory_order_relaxed));
  } else {
    // A fresh state but for the pool's fields, which stay as they are: in_use must never read
    // 0 again while this thread holds the state, or another new thread would take it too.
    static_assert(std::is_standard_layout_v<ThreadState>, "offsetof below");
    static_assert(offsetof(ThreadState, next_state) + sizeof(ThreadState*) ==
                      offsetof(ThreadState, in_use),
                  "the pool's fields are the last ones");
    std::memset(static_cast<void*>(t), 0, offsetof(ThreadState, next_state));
  }
  // A signal handler of this thread that recorded meanwhile may have taken a state of its own
  // and set t_self: then that one stays the thread's and ours goes back to the pool. A CAS on
  // the thread's own pointer: atomic against its signal handlers, which is all it needs.
  ThreadState* mine = const_cast<ThreadState*>(&g_closed_state);
  if (!__atomic_compare_exchange_n(&t_self, &mine, t, false, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED)) {
    // release: pairs with the next taker's acquire, as at thread exit.
    t->in_use.store(0, std::memory_order_release);
    return mine;
  }
  // The key's destructor returns the state to the pool at thread exit (and releases its ring).
  // The key exists from load on (below), one of the first 32 of the process in practice, so
  // setspecific does not allocate.
  if (g_process.key_ok) pthread_setspecific(g_process.release_key, t);
  return t;
}

void disable(const char* why) noexcept {
  detail::g_segment.store(nullptr, std::memory_order_relaxed);
  // One line, once: the traced program runs on untraced.
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed))
    std::fprintf(stderr, "spanring: tracing disabled: %s\n", why);
}

namespace {

void release_state(void* state) noexcept;

// Fork child: the only thread of the child is the forking thread. It must never write into the
// ring it inherited from the parent (the parent's thread still owns it), so it forgets it and
// claims a ring of its own, with the child's pid/tid, on its next record.
// Fork prepare, in the forking thread: copy its open spans, which the child inherits (they end
// in the child too), so the child's ring can describe them if the child is killed.
void on_fork_prepare() noexcept {
  if (!has_state(t_self)) return;
  ThreadState& t = *t_self;
  t.stash_count = 0;
  RingHeader* ring = t.ring.shared();
  if (ring == nullptr) return;
  uint32_t n = ring->open_depth.load(std::memory_order_relaxed);
  if (n > kOpenSpanMax) n = kOpenSpanMax;
  std::memcpy(t.stash, ring->open, n * sizeof(OpenSpan));
  t.stash_count = n;
}

void on_fork_parent() noexcept {
  if (has_state(t_self)) t_self->stash_count = 0;
}

void on_fork_child() noexcept {
  // The parent's other threads do not exist here: their states are free for the child's.
  for (ThreadState* s = g_states.load(std::memory_order_relaxed); s != nullptr;
       s = s->next_state)
    if (s != t_self) s->in_use.store(0, std::memory_order_relaxed);
  g_process.pid = static_cast<uint32_t>(::getpid());
  g_process.start_time = process_start_time(g_process.pid);
  // The clock anchor stays the parent's: CLOCK_MONOTONIC is system-wide, and the spans the child
  // inherited began after the parent attached, so they are not before it.
  if (!has_state(t_self)) return;
  ThreadState& t = *t_self;
  t.ring.detach();  // the gate closed (0): not ready, not busy
  t.no_ring_wait = 0;
  t.reentrant_drops.store(0, std::memory_order_relaxed);
  // The key's value was inherited (the same state): it returns the state at the child's exit.
}

}  // namespace

namespace {

// A thread of this copy of the library that holds a ring of the attached segment or has Spans
// open (their names' ids are the attached segment's: a fork child inherits them open), or null.
// Racy by nature against a thread claiming a ring meanwhile, which attach() does not support.
const ThreadState* state_holding_ring() noexcept {
  // acquire: pairs with the push's release (a state's fields are written before it is seen).
  for (const ThreadState* s = g_states.load(std::memory_order_acquire); s != nullptr;
       s = s->next_state)
    if (s->in_use.load(std::memory_order_acquire) != 0 && (s->ring.shared() != nullptr || s->depth != 0))
      return s;
  return nullptr;
}

// The name attach_segment last attached to (NUL-terminated; empty when longer).
char g_attached_name[256];

// A segment that cannot be used: tracing is disabled, unless this process is attached to a
// segment already, which it keeps (a failed attach of another name never ends a working one).
void attach_failed(const char* name, const char* why) noexcept {
  if (detail::g_segment.load(std::memory_order_relaxed) == nullptr) {
    disable(why);
    return;
  }
  std::fprintf(stderr, "spanring: attach(\"%s\") failed, still recording as before: %s\n", name,
               why);
}

}  // namespace

bool attach_segment(const char* name) noexcept {
  try {
    Segment seg = Segment::open(name);
    // The geometry as validated once by the segment's view; never read from the header again.
    const SegmentView& view = seg.view();
    ProcessState& p = g_process;
    // A thread that holds a ring keeps writing it: its ring is the old segment's, and the ids its
    // records carry would come from the new segment's table, naming other strings there; a Span
    // open on it (a fork child's inherited ones too) carries its name's id in the old table. So
    // another segment is refused while any thread holds a ring or has Spans open (the process
    // records on where it was, nothing lost); the same segment again is a no-op. (Rings are
    // released at thread exit and forgotten by a fork child, so attaching before the first
    // record, or first thing in a child forked outside any Span, always works.)
    if (p.header != nullptr && state_holding_ring() != nullptr) {
      const SegmentHeader& now = view.header();
      if (std::strcmp(g_attached_name, name) == 0 && p.header->creator_pid == now.creator_pid &&
          p.header->creator_start_time == now.creator_start_time &&
          p.header->segment_bytes == now.segment_bytes && p.ring_count == view.ring_count() &&
          p.ring_capacity == view.ring_capacity())
        return true;  // the same segment (name, creator and geometry): nothing changes
      std::fprintf(stderr,
                   "spanring: attach(\"%s\") refused: threads of this process already record into "
                   "another segment or have spans open; attach before the first record (or first "
                   "thing in a child forked outside any span)\n",
                   name);
      return false;
    }
    p.header = &view.header();
    p.rings = &view.ring(0);
    p.slots = view.ring_slots(0);
    p.strings = view.strings();
    p.ring_count = view.ring_count();
    p.ring_capacity = view.ring_capacity();
    p.pid = static_cast<uint32_t>(::getpid());
    p.start_time = process_start_time(p.pid);
    take_anchor(p);
    // Every module's cached string ids name the previous segment's table (span.h,
    // ModuleStrings): a new generation empties each table on its next lookup. Never 0 again.
    // relaxed: g_segment's release below publishes it.
    uint32_t generation = detail::g_attach_generation.load(std::memory_order_relaxed) + 1;
    if (generation == 0) generation = 1;
    detail::g_attach_generation.store(generation, std::memory_order_relaxed);
    static bool atfork_done = false;
    if (!atfork_done)
      atfork_done = pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child) == 0;
    if (std::strlen(name) < sizeof g_attached_name)
      std::memcpy(g_attached_name, name, std::strlen(name) + 1);
    else
      g_attached_name[0] = '\0';
    void* base = seg.base();
    seg.leak();  // never unmapped: threads may still emit while the process exits
    // release: the ProcessState fields above are visible to any thread that sees non-null.
    detail::g_segment.store(base, std::memory_order_release);
    return true;
  } catch (const std::exception& e) {
    attach_failed(name, e.what());
  } catch (...) {
    attach_failed(name, "unknown error while attaching");
  }
  return false;
}

namespace {

// exec() keeps the pid (and its start time) but ends every thread of the old image, which
// never released its rings. At load, before any thread of this copy claims one, hand those
// rings to the drainer as released so they are drained and freed now, not when the pid exits.
// A ring of this pid is the old image's only when its owner thread is gone (tgkill with signal
// 0: ESRCH): this copy may be loaded by dlopen into a process whose live threads hold rings
// through another copy of libspanring (the executable's, another plugin's), which must stay
// theirs. A ring of the thread whose tid is the pid (the old image's leader, or this image's
// main thread: exec keeps the tid of the leader) cannot be told apart, so it is left to the
// drainer, which frees it when the process exits.
void release_rings_of_previous_image() noexcept {
  const ProcessState& p = g_process;
  for (uint32_t i = 0; i < p.ring_count; ++i) {
    RingHeader& r = p.rings[i];
    if (r.state.load(std::memory_order_acquire) == kRingActive && r.owner_pid == p.pid &&
        r.owner_start_time == p.start_time && r.owner_tid != p.pid &&
        ::syscall(SYS_tgkill, p.pid, r.owner_tid, 0) != 0 && errno == ESRCH) {
      uint32_t expected = kRingActive;
      // release: the old image's last head happens-before the drainer's acquire of the state.
      r.state.compare_exchange_strong(expected, kRingReleased, std::memory_order_release,
                                      std::memory_order_relaxed);
    }
  }
}

__attribute__((constructor)) void attach_from_environment() {
  // The key's destructor returns a thread's state (and its ring) at thread exit. Created here,
  // at load, so that a thread's first record (maybe in a signal handler) only sets it.
  g_process.key_ok = pthread_key_create(&g_process.release_key, release_state) == 0;
  const char* name = std::getenv("SPANRING_SEGMENT");
  if (name != nullptr && name[0] != '\0' && attach_segment(name))
    release_rings_of_previous_image();
}

// Thread exit (pthread key destructor): hand the ring to the drainer, which drains and frees
// it, and the state to the pool. A signal handler that records after this finds no state and
// takes one again (the key is set again, so glibc runs this once more).
void release_state(void* state) noexcept {
  ThreadState& t = *static_cast<ThreadState*>(state);
  if (RingHeader* ring = t.ring.shared(); ring != nullptr) {
    t.ring.detach();  // the gate closed (0)
    // release: every record this thread published (head) happens-before the drainer's acquire
    // of state == kRingReleased.
    ring->state.store(kRingReleased, std::memory_order_release);
  }
  if (t_self == &t) t_self = const_cast<ThreadState*>(&g_closed_state);
  // release: this thread's last writes to the state happen before the next owner's acquire.
  t.in_use.store(0, std::memory_order_release);
}

// dlclose of this copy of the library (a plugin that links libspanring.a, or libspanring.so
// when its last user goes), and process exit. Threads that outlive a dlclose must not run a
// key destructor in unmapped code at their exit: delete the key. Nothing else is undone: at
// exit other threads may still be recording (the segment and states stay mapped), and a thread
// alive across a dlclose keeps its ring claimed until its process exits (the drainer reclaims
// the rings of a dead process).
__attribute__((destructor)) void detach_at_unload() {
  if (g_process.key_ok) {
    g_process.key_ok = false;
    pthread_key_delete(g_process.release_key);
  }
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

// A new ring is active: wake a drainer in its idle wait (a FUTEX_WAIT on ring_claims,
// drain/drainer.h) so that it starts reading this ring within a warm poll, not after the rest
// of a sleep of up to 20 ms that a default ring at 4 M records/s does not outlast (8.2 ms).
// A claim is the producer's slow path (it already made madvise calls): one more system call
// here, none on any later record. errno is kept: a claim may run inside a caller's code
// between a failing call and its errno check (or in a signal handler).
void wake_drainer() noexcept {
  std::atomic<uint32_t>& word = g_process.header->ring_claims;
  // release: orders the add after the store of kRingActive, so a drainer that acquires the
  // new count and then scans the rings finds this one active.
  word.fetch_add(1, std::memory_order_release);
  const int saved = errno;
  // Not FUTEX_PRIVATE_FLAG: the drainer waits from another process on its own mapping.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
  errno = saved;
}

}  // namespace

bool claim_ring(ThreadState& t) noexcept {
  const ProcessState& p = g_process;
  const uint32_t tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  for (uint32_t i = 0; i < p.ring_count; ++i) {
    // The lowest free ring: a ring's pages stay committed once a thread claimed it, so reusing
    // the rings that earlier (now exited) threads committed keeps a segment's memory at its
    // most threads alive at once, not at every thread that ever traced (threads started one
    // after another would otherwise commit ring after ring). Threads starting together try
    // the same rings first; the relaxed pre-check below keeps that to a load per ring taken.
    RingHeader& r = p.rings[i];
    uint32_t expected = kRingFree;
    // relaxed pre-check avoids dirtying the cache line of rings in use.
    if (r.state.load(std::memory_order_relaxed) != kRingFree) continue;
    // acquire: pairs with the drainer's release of kRingFree, after which it no longer reads
    // this ring and has stored tail == head.
    if (!r.state.compare_exchange_strong(expected, kRingClaiming, std::memory_order_acquire,
                                         std::memory_order_relaxed))
      continue;
    SPANRING_TEST_POINT("producer_claim_started");
    std::byte* slots =
        p.slots + uint64_t{static_cast<uint32_t>(&r - p.rings)} * p.ring_capacity * kSlotBytes;
    // Commit this ring's pages and map them into our page tables now: the segment leaves slot
    // pages to their claimers (Segment::create), and a first store to a shared page costs
    // microseconds, which no later record should pay. A page the kernel cannot supply (/dev/shm
    // full) fails here with an error instead of a SIGBUS at a record: the ring goes back
    // untouched (its owner fields are not written yet) and the next one is tried; a ring that
    // was claimed before has its pages already. EINVAL (a kernel before 5.14): the creator
    // reserved every page, so only the mapping is left to the first records.
    // madvise wants a page-aligned start, and slots start on a cache line: from the page that
    // holds the first slot (whose other bytes, another ring's or the string table's, are only
    // faulted in, never written). getauxval, not sysconf: a claim may run in a signal handler.
    const uintptr_t page = static_cast<uintptr_t>(getauxval(AT_PAGESZ));
    const uintptr_t first = reinterpret_cast<uintptr_t>(slots);
    const uintptr_t start = page != 0 ? first & ~(page - 1) : first;
    if (madvise(reinterpret_cast<void*>(start),
                first - start + uint64_t{p.ring_capacity} * kSlotBytes,
                MADV_POPULATE_WRITE) != 0 &&
        errno != EINVAL) {
      // /dev/shm is full. The call may have committed part of the ring before it failed: give
      // those pages back (MADV_REMOVE punches them out of the object), or every failed claim
      // would keep some and fewer rings would fit than `spanring run` said. Only pages wholly
      // inside this ring: the edge pages hold another ring's slots or the string table. The
      // rings after this one are as uncommitted as it was (the lowest free ring is tried
      // first), so the claim gives up instead of failing on each of them.
      const uintptr_t end = first + uint64_t{p.ring_capacity} * kSlotBytes;
      const uintptr_t lo = page != 0 ? (first + page - 1) & ~(page - 1) : end;
      const uintptr_t hi = page != 0 ? end & ~(page - 1) : end;
      if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_REMOVE);
      // release: the next claimer's acquire of kRingFree must still see what the drainer
      // published with its own release of kRingFree (tail == head), which our CAS acquired.
      r.state.store(kRingFree, std::memory_order_release);
      return false;
    }
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
    // The new owner's head, cached tail, sequence and drop counter (drops stored as 0).
    t.ring.attach(&r, slots, p.ring_capacity);
    // release: the owner fields above are visible to the drainer's acquire of kRingActive.
    r.state.store(kRingActive, std::memory_order_release);
    wake_drainer();
    // The inline record path (span.h) writes from now on, when it times with the counter (else
    // kGateClock keeps it out, and only the text record path writes inline). The epoch: the
    // generation whose string ids SPANRING_SPAN's sites may give this thread's records
    // (relaxed: written by attach before g_segment was published, which this thread acquired
    // or inherited).
    t.ring.open_gate(kGateOpen | (p.use_tsc ? 0 : kGateClock),
                     detail::g_attach_generation.load(std::memory_order_relaxed));
    // relaxed: as for the ring's flag above.
    t.early_ns =
        std::atomic_ref(g_process.anchor_origin).load(std::memory_order_relaxed) == 0
            ? static_cast<int64_t>(p.anchor_mono_ns) - 1
            : -1;
    return true;
  }
  return false;
}

void set_thread_name(const char* name) noexcept {
  ThreadState* const self = thread_state();
  if (self == nullptr) return;  // no state could be mapped: the kernel's name stays
  ThreadState& t = *self;
  std::memset(t.name, 0, sizeof t.name);
  if (name != nullptr) std::memcpy(t.name, name, strnlen(name, sizeof t.name));
  t.name_set = name != nullptr && name[0] != '\0';
}

bool attach(const char* segment_name) noexcept {
  if (segment_name == nullptr || segment_name[0] == '\0') return false;
  return attach_segment(segment_name);
}

}  // namespace spanring
