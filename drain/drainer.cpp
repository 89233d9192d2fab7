#include "drainer.h"

#include "strace_format.h"

#include <cstdio>
#include <thread>
#include <unordered_map>

namespace spanring {
namespace {

// 1 MiB buffers: large enough that one io_uring write carries thousands of lines, small enough
// that a partly filled buffer flushed when idle costs nothing. At most kMaxBuffers in flight
// (64 MiB of formatted text) before the drain thread waits for the file.
constexpr size_t kBufferBytes = 1u << 20;
constexpr size_t kMaxBuffers = 64;
// Room one record may need: a drops line, an anchor line and the span line.
constexpr size_t kRecordRoom = 3 * kMaxLineBytes;

}  // namespace

Drainer::Drainer(const Segment& segment, UringWriter& writer)
    : segment_(segment), writer_(writer), rings_(segment.ring_count()) {}

Drainer::~Drainer() = default;

Buffer* Drainer::take_buffer() {
  for (;;) {
    if (!free_.empty()) {
      Buffer* b = free_.back();
      free_.pop_back();
      b->len = 0;
      b->records = 0;
      b->tails.clear();
      b->failed = false;
      b->sync = false;
      return b;
    }
    if (buffers_.size() < kMaxBuffers) {
      auto b = std::make_unique<Buffer>();
      b->data = std::make_unique<char[]>(kBufferBytes);
      b->capacity = kBufferBytes;
      buffers_.push_back(std::move(b));
      return buffers_.back().get();
    }
    // Every buffer is on its way to the file: wait for one to come back.
    if (Buffer* done = writer_.take_done(100000)) apply(done);
  }
}

char* Drainer::reserve(size_t bytes) {
  if (current_ != nullptr && current_->capacity - current_->len < bytes) submit_current();
  if (current_ == nullptr) current_ = take_buffer();
  return current_->data.get() + current_->len;
}

void Drainer::submit_current() {
  if (current_ == nullptr) return;
  for (uint32_t i : dirty_) {
    RingState& rs = rings_[i];
    rs.dirty = false;
    const bool last = rs.gone && rs.freeing;
    current_->tails.push_back(TailUpdate{i, rs.generation, rs.read, last});
  }
  dirty_.clear();
  Buffer* b = current_;
  current_ = nullptr;
  ++in_flight_;
  writer_.submit(b);
}

void Drainer::flush_partial() {
  if (current_ != nullptr && (current_->len > 0 || !dirty_.empty())) submit_current();
  while (Buffer* b = writer_.take_done(0)) apply(b);
}

void Drainer::apply(Buffer* b) {
  --in_flight_;
  if (b->failed) {
    // The records are not in the file: they were counted as written when formatted.
    stats_.written -= b->records;
    stats_.unwritten += b->records;
    stats_.dropped += b->records;
  }
  for (const TailUpdate& t : b->tails) {
    RingState& rs = rings_[t.ring];
    if (!rs.owned || rs.generation != t.generation) continue;
    RingHeader& r = segment_.ring(t.ring);
    // release: our reads of the slots below this tail happen-before the producer's acquire
    // of tail, after which it may overwrite them.
    r.tail.store(t.tail, std::memory_order_release);
    if (t.free_after) {
      rs = RingState{};
      // release: the tail store above and our last reads happen-before the next owner's CAS
      // (acquire) of kRingFree.
      r.state.store(kRingFree, std::memory_order_release);
    }
  }
  if (!b->sync) free_.push_back(b);
}

void Drainer::drops_line(RingState& rs, uint64_t dropped, uint64_t first, uint64_t last,
                         const char* reason) {
  char* p = reserve(kMaxLineBytes);
  commit(format_drops(p, rs.pid, rs.tid, dropped, first, last, reason));
  stats_.dropped += dropped;
}

void Drainer::adopt_owner(uint32_t index, RingState& rs) {
  const RingHeader& r = segment_.ring(index);
  rs = RingState{};
  rs.owned = true;
  rs.generation = r.generation;
  rs.pid = r.owner_pid;
  rs.tid = r.owner_tid;
  rs.start_time = r.owner_start_time;
  rs.anchor_mono = r.anchor_mono_ns;
  rs.anchor_wall = r.anchor_wall_ns;
  // relaxed: tail is written only by drainers, and a previous drainer's stores were made
  // before the producer's claim that we acquired through state.
  rs.read = r.tail.load(std::memory_order_relaxed);
  pids_.insert(rs.pid);
  threads_.insert((uint64_t{rs.pid} << 32) | rs.tid);
  stats_.processes = pids_.size();
  stats_.threads = threads_.size();
}

void Drainer::quarantine(uint32_t index, RingState& rs, const std::string& why) {
  RingHeader& r = segment_.ring(index);
  std::fprintf(stderr, "spanring: ring %u (pid %u tid %u) quarantined: %s\n", index, rs.pid,
               rs.tid, why.c_str());
  rs.quarantined = true;
  ++stats_.corrupt_rings;
  // The producer keeps writing into it (it never reads state); we never read it again.
  r.state.store(kRingQuarantined, std::memory_order_relaxed);
  // Whatever this owner published or drops from here on is lost with the ring.
  const uint64_t drops = r.drops.load(std::memory_order_acquire);
  const uint64_t lost = drops > rs.gap_drops ? drops - rs.gap_drops : 0;
  drops_line(rs, lost, rs.next_seq, rs.next_seq + (lost ? lost - 1 : 0), "corrupt");
  if (!rs.dirty) {
    rs.dirty = true;
    dirty_.push_back(index);
  }
}

void Drainer::finish_owner(uint32_t index, RingState& rs) {
  // The owner is gone and everything it published is read: report drops after its last
  // record, then free the ring once this buffer is in the file.
  const RingHeader& r = segment_.ring(index);
  const uint64_t drops = r.drops.load(std::memory_order_acquire);
  if (drops > rs.gap_drops) {
    const uint64_t n = drops - rs.gap_drops;
    drops_line(rs, n, rs.next_seq, rs.next_seq + n - 1, "ring_full");
    rs.next_seq += n;
    rs.gap_drops = drops;
  }
  rs.freeing = true;
  if (!rs.dirty) {
    rs.dirty = true;
    dirty_.push_back(index);
  }
}

void Drainer::drain_ring(uint32_t index, bool final_pass) {
  RingState& rs = rings_[index];
  if (rs.quarantined || rs.freeing) return;
  RingHeader& r = segment_.ring(index);
  // acquire: pairs with the producer's release of kRingActive (owner fields) or
  // kRingReleased (its last head).
  const uint32_t state = r.state.load(std::memory_order_acquire);
  if (state == kRingActive || state == kRingReleased) {
    if (!rs.owned || r.generation != rs.generation) adopt_owner(index, rs);
    if (state == kRingReleased) rs.gone = true;
  } else if (state == kRingClaiming && final_pass && rs.owned) {
    // A claim in progress by a process that died: nothing more will be published.
    rs.gone = true;
  } else {
    return;
  }
  if (final_pass) rs.gone = true;  // the caller says every owner has exited

  const RingView view{segment_.ring_slots(index), segment_.ring_capacity()};
  // acquire: pairs with the producer's release of head; every slot below it is complete.
  const uint64_t head = r.head.load(std::memory_order_acquire);
  if (head - rs.read > view.capacity) {
    quarantine(index, rs, "head " + std::to_string(head) + " is not within one ring of tail " +
                              std::to_string(rs.read));
    return;
  }
  RecordCopy rec;
  std::string why;
  while (rs.read != head) {
    if (read_record(view, rs.read, head, rs.next_seq, rec, why) != ReadStatus::kRecord) {
      quarantine(index, rs, why);
      return;
    }
    char* p = reserve(kRecordRoom);
    char* const start = p;
    const RecordHeader& h = rec.header;
    if (h.seq > rs.next_seq) {
      // A gap: the producer found the ring full for these records.
      const uint64_t n = h.seq - rs.next_seq;
      p += format_drops(p, rs.pid, rs.tid, n, rs.next_seq, h.seq - 1, "ring_full");
      stats_.dropped += n;
      rs.gap_drops += n;
    }
    if (h.flags & kRecordInvalid) {
      p += format_drops(p, rs.pid, rs.tid, 1, h.seq, h.seq, "invalid");
      stats_.dropped += 1;
    } else {
      if (anchored_pids_.insert(rs.pid).second) {
        // mono_ns must be <= the pid's first span start; a span begun before the process
        // attached (or before a fork) may start earlier than the process' anchor, so move the
        // anchor back to it, keeping the (mono, wall) pair's offset.
        uint64_t mono = rs.anchor_mono;
        uint64_t wall = rs.anchor_wall;
        if (h.ts_ns < mono && !is_device_span(rec)) {
          wall -= mono - h.ts_ns;
          mono = h.ts_ns;
        }
        p += format_anchor(p, rs.pid, rs.tid, mono, wall);
      }
      p += format_span(p, rs.pid, rs.tid, rec);
      ++current_->records;
      ++stats_.written;
    }
    commit(static_cast<size_t>(p - start));
    rs.next_seq = h.seq + 1;
    rs.read += h.slots;
    if (!rs.dirty) {
      rs.dirty = true;
      dirty_.push_back(index);
    }
  }
  if (rs.gone) finish_owner(index, rs);
}

uint64_t Drainer::poll() {
  while (Buffer* b = writer_.take_done(0)) apply(b);
  const uint64_t before = stats_.written + stats_.dropped;
  for (uint32_t i = 0; i < rings_.size(); ++i) drain_ring(i, false);
  return stats_.written + stats_.dropped - before;
}

void Drainer::check_owners() {
  std::unordered_map<uint32_t, uint64_t> start_times;  // one /proc read per pid per check
  for (uint32_t i = 0; i < rings_.size(); ++i) {
    RingState& rs = rings_[i];
    if (!rs.owned || rs.gone || rs.quarantined) continue;
    auto it = start_times.find(rs.pid);
    if (it == start_times.end()) it = start_times.emplace(rs.pid, process_start_time(rs.pid)).first;
    // A pid that no longer exists, or exists with another start time, is a dead owner.
    if (it->second != rs.start_time) rs.gone = true;
  }
}

bool Drainer::finish(bool owners_gone) {
  while (Buffer* b = writer_.take_done(0)) apply(b);
  for (uint32_t i = 0; i < rings_.size(); ++i) drain_ring(i, owners_gone);
  const uint64_t no_ring =
      segment_.header().no_ring_drops.load(std::memory_order_relaxed);
  if (no_ring > no_ring_reported_) {
    RingState none{};
    drops_line(none, no_ring - no_ring_reported_, 0, 0, "no_ring");
    no_ring_reported_ = no_ring;
  }
  submit_current();
  // A sync marker comes back after every earlier buffer, then the file is fsync'ed.
  auto marker = std::make_unique<Buffer>();
  marker->sync = true;
  ++in_flight_;
  writer_.submit(marker.get());
  bool synced = false;
  while (!synced) {
    Buffer* b = writer_.take_done(100000);
    if (b == nullptr) continue;
    apply(b);
    synced = b == marker.get();
  }
  return !writer_.had_error();
}

}  // namespace spanring
