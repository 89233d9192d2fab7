// The commit journal: how the drainer makes "a ring's tail moves only once the bytes holding
// its records are in the file" survive its own death (segment_layout.h, SegmentHeader's commit
// record, and JournalEntry).
//
// A commit, once a buffer is written: the entries (each touched ring's new drainer line) and
// journal_end are written, journal_seq turns odd (pending), the entries are applied (tails
// released to the producers, rings freed), commit_offset is set and journal_seq turns even.
// A drainer killed anywhere in between leaves either an even seq (the file is cut back to the
// old commit_offset) or an odd one (the journal is complete: recover() applies it again, which
// is idempotent). Test points (test_point.h) sit after each visible step.
//
// Which commit goes with which bytes: the drainer hands buffers to its Destination
// (drain/destination.h) in order and keeps, for each, the Commit it brings (TailUpdates, the
// segment-wide counters) in PendingCommits, in the same order; when the destination says the
// oldest buffer is durable, its Commit goes through CommitJournal::commit(). The buffers
// themselves carry only bytes.
//
// Drainer thread only, with the DrainerLock held. Indices and counts read back from the
// segment (a journal entry's ring, journal_count) are checked against the SegmentView.
#pragma once

#include <spanring/segment.h>
#include <spanring/segment_view.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace spanring {

// One ring owner's drainer line after the bytes of a buffer: where its tail may move once they
// are durable. The owner's pid, tid and first drained sequence number come along for a
// destination that keeps per-owner state (the flight recorder's window).
struct TailUpdate {
  uint32_t ring;            // ring index
  uint32_t generation;      // owner generation the records belong to
  uint64_t tail;            // slots consumed up to here
  uint64_t next_seq;        // the owner's next expected sequence number at `tail`
  uint64_t drops_reported;  // the owner's drops written so far, this buffer included
  bool free_after;          // the owner is gone and this is its last tail: free the ring
  uint32_t pid;
  uint32_t tid;
  uint64_t first_seq;       // the first sequence number this drainer drained of the owner
};

// What one buffer brings to the segment once it is durable.
struct Commit {
  std::vector<TailUpdate> tails;  // every owner with records or reports in the buffer
  uint64_t records = 0;           // spans formatted into it (unwritten if its write fails)
  uint64_t no_ring_reported = 0;  // segment counters written up to this buffer (0 = unchanged)
  uint64_t vfork_reported = 0;
  uint64_t max_size_dropped = 0;  // --max-size: records not in the file nor reported, as of it
  uint64_t unwritten = 0;         // records whose write failed, every drainer's, as of it (set
                                  //   when it is durable)
  // The drainer's own (drain/drainer.h, "After a failed write"): the buffer's failure epoch
  // (Buffer::epoch) and its place among the buffers the drainer began.
  uint64_t epoch = 0;
  uint64_t serial = 0;

  void clear() noexcept {
    tails.clear();
    records = 0;
    no_ring_reported = 0;
    vfork_reported = 0;
    max_size_dropped = 0;
    unwritten = 0;
    epoch = 0;
    serial = 0;
  }
};

// The Commit of the buffer being filled (open()) and those of the buffers handed to the
// destination and not durable yet, oldest first. Storage is reused: a steady drainer does not
// allocate here.
class PendingCommits {
 public:
  // The commit of the buffer being filled.
  Commit& open() noexcept { return open_; }
  // The buffer being filled was handed over: its commit joins the queue (and is returned, to
  // be read while the buffer is submitted); open() is empty again.
  const Commit& seal();
  // The oldest handed-over commit (the queue must not be empty) and its removal.
  Commit& front() noexcept { return queue_.front(); }
  void pop();
  bool empty() const noexcept { return queue_.empty(); }
  size_t size() const noexcept { return queue_.size(); }

 private:
  Commit open_;
  std::deque<Commit> queue_;
  std::vector<Commit> spare_;  // popped commits, their vectors' capacity kept
};

class CommitJournal {
 public:
  explicit CommitJournal(const SegmentView& view) noexcept : view_(view) {}

  // Where the next commit's entries are written: ring_count() entries in the segment.
  JournalEntry* entries() const noexcept { return view_.journal(); }

  // Commits the first `count` entries of entries(), which describe the file up to
  // `file_end` bytes. `no_ring_reported` / `vfork_reported`: the segment-wide drop totals the
  // committed bytes report (0: unchanged). `max_size_dropped`: records kept out of the file by
  // --max-size and not reported in it, as of these bytes (always set; journaled with the
  // entries). `unwritten`: records whose write failed, every drainer's, as of these bytes
  // (always set; journaled likewise).
  void commit(uint32_t count, uint64_t file_end, uint64_t no_ring_reported,
              uint64_t vfork_reported, uint64_t max_size_dropped, uint64_t unwritten) const;
  // Commits `c`, durable up to `file_end`: its TailUpdates for which `live(t)` holds (the
  // owner is still the drainer's: a ring freed and re-adopted since is not touched) become the
  // journal's entries.
  template <class Live>
  void commit(const Commit& c, uint64_t file_end, Live&& live) const {
    JournalEntry* j = entries();
    uint32_t n = 0;
    for (const TailUpdate& t : c.tails) {
      if (!live(t)) continue;
      j[n++] = JournalEntry{t.ring, t.generation, t.tail, t.next_seq, t.drops_reported,
                            t.free_after ? 1u : 0u, 0};
    }
    commit(n, file_end, c.no_ring_reported, c.vfork_reported, c.max_size_dropped, c.unwritten);
  }

  // Names the file the segment is drained into now (its device and inode; 0, 0: none) and
  // the bytes of it committed (`commit_offset`). The offset is stored first: a drainer killed
  // between the stores leaves (previous file, offset), and a restart finds the previous file
  // no longer under the output's name (a rotation renamed it, or the new file replaced it), so
  // it starts afresh; the other order could leave (new file, stale offset), which a restart
  // cannot resume.
  void set_output(uint64_t dev, uint64_t ino, uint64_t commit_offset) const noexcept;

  // Applies one entry to its ring's drainer line: next_seq, drops_reported, generation, the
  // tail (release), and frees the ring when the entry says so and the ring still has that
  // owner. Idempotent. Takes a copy: the entry lives in shared memory, and its ring index is
  // checked once and used as checked. An entry naming no ring of the segment is ignored.
  static void apply(const SegmentView& view, JournalEntry e) noexcept;

 private:
  SegmentView view_;
};

// Finishes a commit a killed drainer left half done (re-applies its journal) and returns how
// many bytes of `out_path` hold committed output to keep: the commit offset when `out_path` is
// the file the segment was drained into (same device and inode), else 0 (a new file).
// Call with the DrainerLock held, before opening the UringWriter.
uint64_t recover(const Segment& segment, const std::string& out_path);

}  // namespace spanring
