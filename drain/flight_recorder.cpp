// FlightRecorder (drain/flight_recorder.h).
#include "drain/flight_recorder.h"

#include "drain/diagnostics.h"
#include "format/binary_format.h"
#include "format/block_frame.h"

#include <spanring/error.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace spanring {
namespace {

// Bookkeeping counted against SIZE besides the blocks' bytes: a rough allowance for a hash
// node or heap block around each entry (their real cost in libstdc++ / glibc malloc is 32-64
// bytes), so that the window's bound holds for the memory the drainer really uses.
constexpr uint64_t kNodeBytes = 64;

}  // namespace

struct FlightRecorder::Job {
  SnapshotRequest req;
  uint64_t number = 0;
  std::unique_ptr<UringWriter> writer;
  // Write buffers (kSnapshotBuffers of kSnapshotBufferBytes): first the file header and
  // metadata blocks, then the window's blocks. Declared after `writer`: gone before it.
  std::unique_ptr<BufferedWriter> out;
  Buffer* cur = nullptr;
  uint64_t next_block = 0;  // the next window block to copy (absolute number)
  uint64_t end_block = 0;   // one past the last block of this snapshot
  uint64_t out_seq = 0;     // the next block sequence number in the snapshot file
  uint64_t records = 0;     // spans in the snapshot's window
  uint64_t overwritten = 0; // sequence numbers reported as overwritten
  uint64_t meta_blocks = 0; // metadata blocks written before the window's
  bool marker_sent = false;
};

FlightRecorder::FlightRecorder(uint64_t size_bytes, UringWriter::Fallback fallback)
    : size_(size_bytes), fallback_(fallback) {
  if (size_bytes < kMinBytes || size_bytes > kMaxBytes)
    throw Error(ErrorCode::kInvalidArgument,
                "--flight-recorder " + std::to_string(size_bytes) + " bytes is out of range (" +
                    std::to_string(kMinBytes) + " bytes .. " + std::to_string(kMaxBytes >> 30) +
                    " GiB)",
                EINVAL, "");
  // Blocks of SIZE / 8 (at most the drainer's usual 1 MiB): eviction frees whole blocks, so the
  // window holds at least 7/8 of SIZE once full.
  block_bytes_ = static_cast<size_t>(std::min<uint64_t>(size_bytes / 8, 1u << 20));
  // Uninitialised: pages are backed only as the window fills them.
  ring_.reset(new char[size_bytes]);
}

FlightRecorder::~FlightRecorder() {
  if (job_) finish_job(false, "the drainer is exiting");
  for (SnapshotRequest& r : queue_) answer_snapshot_error(r.reply_fd, "the drainer is exiting");
}

// ---- Destination ---------------------------------------------------------------------------

void FlightRecorder::attach(DestinationEvents& events, size_t) { events_ = &events; }

Buffer* FlightRecorder::take() {
  Buffer* b = nullptr;
  if (!free_blocks_.empty()) {
    b = free_blocks_.back();
    free_blocks_.pop_back();
  } else {
    auto fresh = std::make_unique<Buffer>();
    // Not zero-filled: every byte is written before it is read.
    fresh->data = std::make_unique_for_overwrite<char[]>(block_bytes_);
    b = fresh.get();
    drain_buffers_.push_back(std::move(fresh));
  }
  b->capacity = block_bytes_;
  b->len = 0;
  return b;
}

void FlightRecorder::submit(Buffer* b, const Commit& commit) {
  // The block goes into the window, which is where it is "written": durable now. Its owners'
  // state after it tells the window what each block holds of whom.
  marks_.clear();
  for (const TailUpdate& t : commit.tails)
    marks_.push_back(FlightOwnerMark{t.ring, t.generation, t.pid, t.tid, t.first_seq,
                                     t.next_seq, t.free_after});
  keep(b->data.get(), b->len, commit.records, marks_, commit.no_ring_reported,
       commit.vfork_reported);
  free_blocks_.push_back(b);
  events_->durable(false, 0);  // `commit` is the drainer's no more
  // Processes the window no longer describes are announced again if they come back.
  for (uint32_t pid : take_forgotten_pids()) events_->forget_process(pid);
}

// ---- the window ------------------------------------------------------------------------------

void FlightRecorder::process(const ProcessEvent& e) {
  auto [it, fresh] = processes_.try_emplace(e.pid);
  Process& p = it->second;
  if (fresh) add_meta(static_cast<int64_t>(sizeof(Process) + kNodeBytes));
  add_meta(static_cast<int64_t>(e.cmdline.size()) - static_cast<int64_t>(p.cmdline.size()));
  p.tid = e.tid;
  p.mono_ns = e.mono_ns;
  p.wall_ns = e.wall_ns;
  p.cmdline.assign(e.cmdline.substr(0, kMaxCmdlineBytes));
  p.known = true;
}

void FlightRecorder::thread(const ThreadEvent& e) {
  auto [it, fresh] = threads_.try_emplace({e.pid, e.tid});
  if (fresh) add_meta(static_cast<int64_t>(sizeof(Thread) + kNodeBytes));
  it->second.name.assign(e.name.substr(0, kMaxThreadNameBytes));
  it->second.known = true;
}

void FlightRecorder::string(uint32_t id, std::string_view bytes) {
  auto [it, fresh] = strings_.try_emplace(id);
  if (fresh) add_meta(static_cast<int64_t>(sizeof(std::string) + kNodeBytes));
  add_meta(static_cast<int64_t>(bytes.size()) - static_cast<int64_t>(it->second.size()));
  it->second.assign(bytes);
}

uint64_t FlightRecorder::overhead_of(const Block& b) const noexcept {
  return sizeof(Block) + kNodeBytes + b.marks.capacity() * sizeof(b.marks[0]) +
         b.last_marks.capacity() * sizeof(uint64_t);
}

void FlightRecorder::keep(const char* data, size_t len, uint64_t records,
                          const std::vector<FlightOwnerMark>& marks, uint64_t no_ring_total,
                          uint64_t vfork_total) {
  const uint64_t number = first_block_ + blocks_.size();
  Block b;
  b.len = static_cast<uint32_t>(len);  // <= block_bytes_ (the drainer's buffer)
  b.records = records;
  if (no_ring_total != 0) no_ring_total_ = no_ring_total;
  if (vfork_total != 0) vfork_total_ = vfork_total;
  b.no_ring_total = no_ring_total_;
  b.vfork_total = vfork_total_;
  b.marks.reserve(marks.size());
  for (const FlightOwnerMark& m : marks) {
    const uint64_t k = key(m.ring, m.generation);
    auto [it, fresh] = owners_.try_emplace(k);
    Owner& o = it->second;
    if (fresh) {
      o.pid = m.pid;
      o.tid = m.tid;
      o.first_seq = m.first_seq;
      o.window_seq = m.first_seq;
      add_meta(sizeof(Owner) + kNodeBytes);
      auto [pit, pfresh] = processes_.try_emplace(m.pid);
      if (pfresh) add_meta(static_cast<int64_t>(sizeof(Process) + kNodeBytes));
      ++pit->second.refs;
      auto [tit, tfresh] = threads_.try_emplace({m.pid, m.tid});
      if (tfresh) add_meta(static_cast<int64_t>(sizeof(Thread) + kNodeBytes));
      ++tit->second.refs;
    }
    o.next_seq = m.next_seq;
    o.last_block = number;
    b.marks.emplace_back(k, m.next_seq);
    if (m.last) {
      o.live = false;
      b.last_marks.push_back(k);
    }
  }
  // Oldest blocks out until the new one and all the bookkeeping fit in SIZE. The window keeps
  // no block when the metadata of live owners alone exceeds SIZE (documented).
  const uint64_t overhead = overhead_of(b);
  while (!blocks_.empty() &&
         (ring_head_ - ring_tail_) + len + blocks_overhead_ + overhead + meta_bytes_ > size_) {
    // A snapshot in progress has not copied this block yet: let it catch up first.
    while (job_ && job_->next_block <= first_block_ && first_block_ < job_->end_block)
      pump(100000);
    evict_front();
  }
  b.offset = ring_head_;
  const uint64_t at = ring_head_ % size_;
  const size_t first = static_cast<size_t>(std::min<uint64_t>(len, size_ - at));
  std::memcpy(ring_.get() + at, data, first);
  if (first < len) std::memcpy(ring_.get(), data + first, len - first);
  ring_head_ += len;
  blocks_overhead_ += overhead;
  blocks_.push_back(std::move(b));
}

void FlightRecorder::evict_front() {
  Block& b = blocks_.front();
  const uint64_t number = first_block_;
  for (const auto& [k, next_seq] : b.marks) {
    auto it = owners_.find(k);
    if (it == owners_.end()) continue;
    it->second.window_seq = std::max(it->second.window_seq, next_seq);
  }
  for (uint64_t k : b.last_marks) {
    auto it = owners_.find(k);
    if (it != owners_.end() && it->second.last_block == number) release_owner(k, it->second);
  }
  evicted_records_ += b.records;
  evicted_no_ring_ = b.no_ring_total;
  evicted_vfork_ = b.vfork_total;
  ring_tail_ = b.offset + b.len;
  blocks_overhead_ -= overhead_of(b);
  blocks_.pop_front();
  ++first_block_;
}

void FlightRecorder::release_owner(uint64_t k, Owner& o) {
  // Gone and out of the window: what is left of it is its overwritten range.
  if (o.next_seq > o.first_seq) {
    if (gone_.size() == kMaxGoneOwners) {
      gone_summed_ += gone_.front().end_seq - gone_.front().first_seq;
      gone_.pop_front();
    } else {
      add_meta(sizeof(Gone));
    }
    gone_.push_back(Gone{o.pid, o.tid, o.first_seq, o.next_seq});
  }
  auto pit = processes_.find(o.pid);
  if (pit != processes_.end() && --pit->second.refs == 0) {
    add_meta(-static_cast<int64_t>(sizeof(Process) + kNodeBytes + pit->second.cmdline.size()));
    processes_.erase(pit);
    forgotten_.push_back(o.pid);
  }
  auto tit = threads_.find({o.pid, o.tid});
  if (tit != threads_.end() && --tit->second.refs == 0) {
    add_meta(-static_cast<int64_t>(sizeof(Thread) + kNodeBytes));
    threads_.erase(tit);
  }
  add_meta(-static_cast<int64_t>(sizeof(Owner) + kNodeBytes));
  owners_.erase(k);
}

std::vector<uint32_t> FlightRecorder::take_forgotten_pids() {
  std::vector<uint32_t> out;
  out.swap(forgotten_);
  return out;
}

void FlightRecorder::copy_out(uint64_t offset, char* to, size_t n) const noexcept {
  const uint64_t at = offset % size_;
  const size_t first = static_cast<size_t>(std::min<uint64_t>(n, size_ - at));
  std::memcpy(to, ring_.get() + at, first);
  if (first < n) std::memcpy(to + first, ring_.get(), n - first);
}

// ---- snapshots -------------------------------------------------------------------------------

void FlightRecorder::request(SnapshotRequest r) { queue_.push_back(std::move(r)); }

void FlightRecorder::start_next() {
  if (job_ || queue_.empty()) return;
  auto job = std::make_unique<Job>();
  job->req = std::move(queue_.front());
  queue_.pop_front();
  job->number = ++started_;
  job->next_block = first_block_;
  job->end_block = first_block_ + blocks_.size();
  for (const Block& b : blocks_) job->records += b.records;

  try {
    job->writer = std::make_unique<UringWriter>(job->req.path, 8, 0, fallback_);
  } catch (const Error& e) {
    report("spanring: snapshot %llu (%s) failed: %s\n",
                 static_cast<unsigned long long>(job->number), job->req.reason.c_str(), e.what());
    answer_snapshot_error(job->req.reply_fd, e.what());
    return;
  }
  job->out = std::make_unique<BufferedWriter>(*job->writer, kSnapshotBufferBytes,
                                              kSnapshotBuffers);
  BufferedWriter& out = *job->out;

  // The metadata blocks: file header (kTraceVersion), processes, threads, string definitions,
  // overwritten ranges.
  BinarySink sink(false, 0);
  Buffer* cur = nullptr;
  auto room = [&]() -> char* {
    if (cur == nullptr) {
      cur = out.take();
      if (job->meta_blocks == 0) {
        FileHeader fh{};
        std::memcpy(fh.magic, kTraceMagic, sizeof fh.magic);
        fh.version = kTraceVersion;
        fh.header_bytes = kFileHeaderBytes;
        std::memcpy(cur->data.get(), &fh, sizeof fh);
        cur->len = sizeof fh;
      }
      cur->len += sink.begin_buffer(cur->data.get() + cur->len);
    }
    return cur->data.get() + cur->len;
  };
  // end_buffer() finds the block header where begin_buffer() put it, relative to its `out`:
  // the first buffer's block starts after the file header. Each block goes to the file as it
  // is finished.
  auto end_meta = [&] {
    if (cur == nullptr) return;
    const size_t at = job->meta_blocks == 0 ? kFileHeaderBytes : 0;
    sink.end_buffer(cur->data.get() + at, cur->len - at);
    out.submit(cur);
    ++job->meta_blocks;
    cur = nullptr;
  };
  // Events in pid order, so two snapshots of the same state are the same bytes.
  std::vector<uint32_t> pids;
  for (const auto& [pid, p] : processes_)
    if (p.known) pids.push_back(pid);
  std::sort(pids.begin(), pids.end());
  auto put = [&](auto&& write) {
    if (cur != nullptr && cur->capacity - cur->len < sink.max_event_bytes()) end_meta();
    char* p = room();
    cur->len += write(p);
  };
  for (uint32_t pid : pids) {
    const Process& p = processes_.at(pid);
    put([&](char* out) {
      return sink.process(out, ProcessEvent{pid, p.tid, p.mono_ns, p.wall_ns, p.cmdline});
    });
  }
  for (const auto& [id, t] : threads_)
    if (t.known)
      put([&](char* out) { return sink.thread(out, ThreadEvent{id.first, id.second, t.name}); });
  // Every string the drainer defined: the window's runs name some of them, whatever blocks
  // it holds, and a snapshot file reads alone.
  for (const auto& [id, bytes] : strings_)
    put([&](char* out) { return sink.string(out, id, bytes); });
  auto overwritten = [&](uint32_t pid, uint32_t tid, uint64_t first, uint64_t end) {
    job->overwritten += end - first;
    put([&](char* out) {
      return sink.drops(out, DropsEvent{pid, tid, end - first, first, end - 1,
                                        DropReason::kOverwritten});
    });
  };
  for (const Gone& g : gone_) overwritten(g.pid, g.tid, g.first_seq, g.end_seq);
  std::vector<const Owner*> partly;
  for (const auto& [k, o] : owners_)
    if (o.window_seq > o.first_seq) partly.push_back(&o);
  std::sort(partly.begin(), partly.end(), [](const Owner* a, const Owner* b) {
    return std::tie(a->pid, a->tid, a->first_seq) < std::tie(b->pid, b->tid, b->first_seq);
  });
  for (const Owner* o : partly) overwritten(o->pid, o->tid, o->first_seq, o->window_seq);
  if (gone_summed_ != 0) {
    // Owners past kMaxGoneOwners: their count, not their ranges (pid=0 tid=0, seq 0..0).
    job->overwritten += gone_summed_;
    put([&](char* out) {
      return sink.drops(out, DropsEvent{0, 0, gone_summed_, 0, 0, DropReason::kOverwritten});
    });
  }
  if (evicted_no_ring_ != 0)
    put([&](char* out) {
      return sink.drops(out, DropsEvent{0, 0, evicted_no_ring_, 0, 0, DropReason::kNoRing});
    });
  if (evicted_vfork_ != 0)
    put([&](char* out) {
      return sink.drops(out, DropsEvent{0, 0, evicted_vfork_, 0, 0, DropReason::kVfork});
    });
  if (cur == nullptr) room();  // a snapshot of nothing still has its header and one block
  end_meta();
  job->out_seq = job->meta_blocks;
  job_ = std::move(job);
  pump();
}

bool FlightRecorder::pump(int64_t wait_us) {
  if (!job_) return false;
  Job& j = *job_;
  // The sync marker comes back after every block is written, once the file is fsynced.
  auto finished = [&] {
    if (!j.marker_sent || !j.out->synced()) return false;
    finish_job(!j.writer->had_error(), "writing it failed (see above)");
    return true;
  };
  j.out->collect(0);
  if (finished()) return false;
  for (;;) {
    while (j.next_block < j.end_block) {
      if (j.cur == nullptr) {
        j.cur = j.out->try_take();
        if (j.cur == nullptr) break;  // every write buffer is on its way to the file
      }
      const Block& blk = blocks_[j.next_block - first_block_];
      if (j.cur->capacity - j.cur->len < blk.len) {
        j.out->submit(j.cur);
        j.cur = nullptr;
        continue;
      }
      // The block as drained, renumbered for this file: a new seq and header CRC; the payload
      // and its CRC are unchanged.
      char* out = j.cur->data.get() + j.cur->len;
      BlockHeader bh;
      copy_out(blk.offset, reinterpret_cast<char*>(&bh), sizeof bh);
      renumber_block(bh, j.out_seq++);
      std::memcpy(out, &bh, sizeof bh);
      copy_out(blk.offset + sizeof bh, out + sizeof bh, blk.len - sizeof bh);
      j.cur->len += blk.len;
      ++j.next_block;
    }
    if (j.next_block == j.end_block) {
      if (j.cur != nullptr) {
        j.out->submit(j.cur);
        j.cur = nullptr;
      }
      if (!j.marker_sent) {
        j.out->request_sync();
        j.marker_sent = true;
      }
    }
    if (wait_us <= 0) return true;
    if (j.out->collect(wait_us) == 0) return true;
    if (finished()) return false;
    wait_us = 0;  // one wait per call; go on copying with what came back
  }
}

void FlightRecorder::finish_job(bool ok, const std::string& why) {
  std::unique_ptr<Job> j = std::move(job_);
  const uint64_t bytes = j->writer ? j->writer->bytes_written() : 0;
  j->cur = nullptr;   // a buffer being filled goes with the pool
  j->out.reset();     // waits for the buffers in flight
  j->writer.reset();  // the writer thread ends once everything queued is written
  if (ok) {
    ++written_;
    report(
                 "spanring: snapshot %llu (%s): %s (%llu bytes: the newest %llu records; %llu "
                 "older ones overwritten)\n",
                 static_cast<unsigned long long>(j->number), j->req.reason.c_str(),
                 j->req.path.c_str(), static_cast<unsigned long long>(bytes),
                 static_cast<unsigned long long>(j->records),
                 static_cast<unsigned long long>(j->overwritten));
    answer_snapshot_ok(j->req.reply_fd, j->req.path);
  } else {
    report("spanring: snapshot %llu (%s) to %s failed: %s\n",
                 static_cast<unsigned long long>(j->number), j->req.reason.c_str(),
                 j->req.path.c_str(), why.c_str());
    answer_snapshot_error(j->req.reply_fd, why);
  }
}

}  // namespace spanring
