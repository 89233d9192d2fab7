// The flight recorder (`spanring run --flight-recorder SIZE`): the drainer keeps only the newest
// SIZE bytes of the binary trace in its own memory, as whole blocks, and writes nothing until a
// snapshot is asked for (SIGUSR1, `spanring snapshot`, the traced command killed by a signal,
// its exit with --snapshot-at-exit). A snapshot is a self-contained binary trace, version 2
// (docs/binary-format.md):
//
//   file header (version 2)
//   metadata blocks: a process event (anchor, command line) per pid and a thread event per
//                    thread the window still describes, then the `overwritten` drops: per ring
//                    owner, the sequence range [first drained, first in the window) that newer
//                    blocks pushed out, and the no_ring/vfork drops reported in those blocks
//   the window's blocks, oldest first, renumbered (payloads and their CRCs as drained)
//
// so per ring owner every sequence number from its first to its newest drained one is either a
// span or inside one drop range of the snapshot, exactly as in a file the drainer writes.
//
// The window: a byte ring of SIZE bytes holding each block the drainer finished (its spans,
// drops, unfinished spans; process and thread events go to the metadata instead, through
// FlightSink, so that a snapshot can name every process and thread whatever blocks it holds).
// Eviction is oldest block first, while the ring bytes plus the bookkeeping (per block: which
// owners it advanced; per owner, pid and thread: its metadata) exceed SIZE. An owner whose
// blocks are all gone and whose ring was freed leaves its metadata; its overwritten range is kept
// in a list of at most kMaxGoneOwners entries, beyond which ranges are summed into one
// pid=0 tid=0 `overwritten` count (memory stays bounded under thread churn).
//
// The recorder is the drainer's Destination (drain/destination.h) in this mode: each buffer the
// drainer fills (one block of block_bytes() at most) is kept in the window and durable at once,
// so tails advance as soon as the records are in the drainer's memory.
//
// Writing a snapshot does not stop draining: its blocks go through a BufferedWriter and a
// UringWriter of its own (io_uring, or write(2) where blocked) a few buffers at a time, between
// polls; blocks not yet
// copied are pinned, and only when the window must evict one of them (the trace outruns the
// snapshot's disk) does keep() wait for the snapshot's writer. Requests that arrive during a
// snapshot are queued and taken one after the other.
//
// Drain thread only (not thread-safe). Memory: SIZE, plus the drainer's one or two drain
// buffers (block_bytes() each), plus while a snapshot is written kSnapshotBuffers x 1 MiB and a
// copy of its metadata blocks.
#pragma once

#include "drain/buffered_writer.h"
#include "drain/destination.h"
#include "drain/snapshot_control.h"
#include "drain/uring_writer.h"
#include "format/binary_sink.h"
#include "format/event.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spanring {

// One ring owner whose records (or drops) a block carries: its state after the block.
struct FlightOwnerMark {
  uint32_t ring = 0;
  uint32_t generation = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t first_seq = 0;  // the first sequence number this drainer drained of the owner
  uint64_t next_seq = 0;   // every sequence number below this is in this block or before it
  bool last = false;       // the owner is gone: this block is its last
};

class FlightRecorder final : public Destination {
 public:
  // SIZE bounds: a window must hold several drain buffers (block_bytes() is SIZE / 8, at most
  // 1 MiB), and the byte ring is one allocation (its pages are touched only as it fills).
  static constexpr uint64_t kMinBytes = 1u << 20;
  static constexpr uint64_t kMaxBytes = uint64_t{64} << 30;
  // Owners whose records were all overwritten and whose ring was freed, reported one by one.
  static constexpr size_t kMaxGoneOwners = 1024;
  // Write buffers of a snapshot in flight at once (1 MiB each).
  static constexpr size_t kSnapshotBuffers = 4;
  static constexpr size_t kSnapshotBufferBytes = 1u << 20;

  // Throws Error (kInvalidArgument) for a size outside [kMinBytes, kMaxBytes]. `fallback`: the
  // snapshot writers' (UringWriter::Fallback).
  FlightRecorder(uint64_t size_bytes, UringWriter::Fallback fallback);
  ~FlightRecorder() override;
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  uint64_t size_bytes() const noexcept { return size_; }
  // What the window counts against SIZE now: the blocks' bytes plus the bookkeeping (block
  // marks, owners, processes with their command lines, threads, overwritten ranges). At most
  // SIZE, unless the metadata of live owners alone is more (then the window holds no block).
  uint64_t bytes_in_use() const noexcept {
    return (ring_head_ - ring_tail_) + blocks_overhead_ + meta_bytes_;
  }
  uint64_t blocks() const noexcept { return blocks_.size(); }
  // The drain buffer size the drainer must use in this mode: one block at most this long.
  size_t block_bytes() const noexcept { return block_bytes_; }

  // ---- Destination: the drainer's buffers of block_bytes() become the window's blocks. No
  // file: dev() and ino() are 0 and nothing is kept from a previous drainer. submit() keeps
  // the block (keep(), with one FlightOwnerMark per TailUpdate of its Commit) and reports it
  // durable at once, then the processes the window let go (forget_process()). finish() has
  // nothing to wait for.
  void attach(DestinationEvents& events, size_t max_event_bytes) override;
  uint64_t dev() const noexcept override { return 0; }
  uint64_t ino() const noexcept override { return 0; }
  uint64_t kept_bytes() const noexcept override { return 0; }
  const std::string& name() const noexcept override { return name_; }
  Buffer* take() override;
  Buffer* take_closing() override { return take(); }
  void give_back(Buffer* b) noexcept override { free_blocks_.push_back(b); }
  void submit(Buffer* b, const Commit& commit) override;
  bool collect(int64_t) override { return false; }
  size_t in_flight() const noexcept override { return 0; }
  bool finish() override { return true; }

  // ---- from the drainer (FlightSink and submit())
  void process(const ProcessEvent& e);
  void thread(const ThreadEvent& e);
  // A string id the drained records name (1..kStringTableEntries - 1, 1..kStringMaxBytes
  // bytes): kept for the metadata of every later snapshot (at most kStringTableEntries of them;
  // a segment never redefines an id).
  void string(uint32_t id, std::string_view bytes);
  // A finished block `data[0, len)` (block header + events, as BinarySink framed it) holding
  // `records` spans; `marks` the owners it advanced; the segment-wide no_ring / vfork totals
  // reported up to this block (0: unchanged). Evicts older blocks as needed (waiting for a
  // snapshot in progress only if it would lose a block it has not copied yet).
  void keep(const char* data, size_t len, uint64_t records,
            const std::vector<FlightOwnerMark>& marks, uint64_t no_ring_total,
            uint64_t vfork_total);
  // Pids whose metadata was let go since the last call (no owner of theirs is live or in the
  // window): the drainer announces them afresh if they appear again.
  std::vector<uint32_t> take_forgotten_pids();

  // ---- snapshots
  // Queues a request (answered when written, or refused).
  void request(SnapshotRequest r);
  // True when a request waits to be started: the caller drains the rings into the window first
  // (Drainer::poll + flush_partial), so the snapshot holds the newest records, then start_next().
  bool pending() const noexcept { return !queue_.empty() && !job_; }
  bool busy() const noexcept { return job_ != nullptr || !queue_.empty(); }
  void start_next();
  // Moves the snapshot in progress on: copies blocks into free write buffers, collects written
  // ones, finishes it when all are written. `wait_us` > 0: waits up to that long for the writer
  // when nothing else can be done. Returns true while a snapshot is in progress.
  bool pump(int64_t wait_us = 0);
  uint64_t snapshots_written() const noexcept { return written_; }

 private:
  struct Owner {
    uint32_t pid = 0;
    uint32_t tid = 0;
    uint64_t first_seq = 0;
    uint64_t window_seq = 0;  // first sequence number not pushed out of the window
    uint64_t next_seq = 0;
    uint64_t last_block = 0;  // the newest block that advanced it
    bool live = true;         // its ring is not freed yet
  };
  struct Process {
    uint32_t tid = 0;
    uint64_t mono_ns = 0;
    uint64_t wall_ns = 0;
    std::string cmdline;
    uint32_t refs = 0;  // owners of this pid in owners_
    bool known = false; // a process event was seen
  };
  struct Thread {
    std::string name;
    uint32_t refs = 0;
    bool known = false;
  };
  struct Gone {
    uint32_t pid, tid;
    uint64_t first_seq, end_seq;  // [first_seq, end_seq) overwritten
  };
  struct Block {
    uint64_t offset = 0;  // in ring_ (monotonic; modulo size_)
    uint32_t len = 0;
    uint64_t records = 0;
    uint64_t no_ring_total = 0;  // cumulative, as of this block
    uint64_t vfork_total = 0;
    std::vector<std::pair<uint64_t, uint64_t>> marks;  // (owner key, next_seq)
    std::vector<uint64_t> last_marks;                  // owner keys whose last block this is
  };
  struct Job;

  static uint64_t key(uint32_t ring, uint32_t generation) noexcept {
    return (uint64_t{ring} << 32) | generation;
  }
  uint64_t overhead_of(const Block& b) const noexcept;
  void evict_front();
  void release_owner(uint64_t k, Owner& o);
  void add_meta(int64_t bytes) noexcept {
    meta_bytes_ = static_cast<uint64_t>(static_cast<int64_t>(meta_bytes_) + bytes);
  }
  void copy_out(uint64_t offset, char* to, size_t n) const noexcept;
  void finish_job(bool ok, const std::string& why);

  uint64_t size_;
  size_t block_bytes_;
  UringWriter::Fallback fallback_;
  std::string name_ = "the flight recorder's memory";
  DestinationEvents* events_ = nullptr;
  // The drainer's buffers (one at a time in practice: each comes back at submit()).
  std::vector<std::unique_ptr<Buffer>> drain_buffers_;
  std::vector<Buffer*> free_blocks_;
  std::vector<FlightOwnerMark> marks_;  // scratch of submit()
  std::unique_ptr<char[]> ring_;
  uint64_t ring_head_ = 0;  // bytes ever stored
  uint64_t ring_tail_ = 0;  // start of the oldest block kept
  std::deque<Block> blocks_;
  uint64_t first_block_ = 0;  // number of blocks_.front()
  uint64_t blocks_overhead_ = 0;
  uint64_t meta_bytes_ = 0;
  uint64_t evicted_no_ring_ = 0;  // segment-wide drops reported in evicted blocks
  uint64_t evicted_vfork_ = 0;
  uint64_t no_ring_total_ = 0;
  uint64_t vfork_total_ = 0;
  uint64_t evicted_records_ = 0;  // spans pushed out (for the snapshot's report line)
  std::unordered_map<uint64_t, Owner> owners_;
  std::unordered_map<uint32_t, Process> processes_;
  std::map<std::pair<uint32_t, uint32_t>, Thread> threads_;
  std::map<uint32_t, std::string> strings_;  // string definitions, by id (snapshot metadata)
  std::deque<Gone> gone_;
  uint64_t gone_summed_ = 0;  // records of owners past kMaxGoneOwners, pid=0 tid=0
  std::vector<uint32_t> forgotten_;
  std::deque<SnapshotRequest> queue_;
  std::unique_ptr<Job> job_;
  uint64_t started_ = 0;
  uint64_t written_ = 0;
};

// The drainer's sink in flight-recorder mode: blocks as BinarySink frames them, except that
// process and thread events go to the recorder's metadata (written 0 bytes here).
class FlightSink final : public Sink {
 public:
  explicit FlightSink(FlightRecorder& recorder) noexcept : recorder_(recorder), blocks_(false) {}
  size_t max_event_bytes() const noexcept override { return blocks_.max_event_bytes(); }
  size_t begin_buffer(char* out) noexcept override { return blocks_.begin_buffer(out); }
  void end_buffer(char* buffer, size_t len) noexcept override { blocks_.end_buffer(buffer, len); }
  // Not noexcept in spirit: copying the command line allocates; an allocation failure ends the
  // drainer (std::terminate), as it does anywhere else in it.
  size_t process(char*, const ProcessEvent& e) noexcept override {
    recorder_.process(e);
    return 0;
  }
  size_t thread(char*, const ThreadEvent& e) noexcept override {
    recorder_.thread(e);
    return 0;
  }
  size_t span(char* out, const SpanEvent& e) noexcept override { return blocks_.span(out, e); }
  size_t drops(char* out, const DropsEvent& e) noexcept override { return blocks_.drops(out, e); }
  size_t unfinished(char* out, const UnfinishedEvent& e) noexcept override {
    return blocks_.unfinished(out, e);
  }
  size_t undescribed(char* out, const UndescribedEvent& e) noexcept override {
    return blocks_.undescribed(out, e);
  }
  // Runs go into the blocks; string definitions into the metadata, so that every snapshot
  // defines the strings its runs name whichever blocks it holds.
  bool runs() const noexcept override { return true; }
  size_t string(char*, uint32_t id, std::string_view bytes) noexcept override {
    recorder_.string(id, bytes);
    return 0;
  }
  size_t run_header_bytes() const noexcept override { return blocks_.run_header_bytes(); }
  // The drainer converts TSC times in the runs it writes here (clock_events() is false): a
  // snapshot's window starts anywhere in the clock's history, which its blocks do not hold.
  size_t begin_run(char* out, uint32_t pid, uint32_t tid, uint64_t first_seq,
                   TscClock::Pair anchor) noexcept override {
    return blocks_.begin_run(out, pid, tid, first_seq, anchor);
  }
  void end_run(char* out, uint32_t slots, uint32_t records) noexcept override {
    blocks_.end_run(out, slots, records);
  }

 private:
  FlightRecorder& recorder_;
  BinarySink blocks_;
};

}  // namespace spanring
