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
// Drainer thread only, with the DrainerLock held. Indices and counts read back from the
// segment (a journal entry's ring, journal_count) are checked against the SegmentView.
#pragma once

#include <spanring/segment.h>
#include <spanring/segment_view.h>

#include <cstdint>
#include <string>

namespace spanring {

class CommitJournal {
 public:
  explicit CommitJournal(const SegmentView& view) noexcept : view_(view) {}

  // Where the next commit's entries are written: ring_count() entries in the segment.
  JournalEntry* entries() const noexcept { return view_.journal(); }

  // Commits the first `count` entries of entries(), which describe the file up to
  // `file_end` bytes. `no_ring_reported` / `vfork_reported`: the segment-wide drop totals the
  // committed bytes report (0: unchanged). `max_size_dropped`: records kept out of the file by
  // --max-size and not reported in it, as of these bytes (always set; journaled with the
  // entries).
  void commit(uint32_t count, uint64_t file_end, uint64_t no_ring_reported,
              uint64_t vfork_reported, uint64_t max_size_dropped) const;

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
