// CommitJournal and recover() (drain/journal.h).
#include "drain/journal.h"

#include <spanring/test_point.h>

#include <sys/stat.h>

#include <utility>

namespace spanring {

void CommitJournal::apply(const SegmentView& view, JournalEntry e) noexcept {
  if (!view.has_ring(e.ring)) return;
  RingHeader& r = view.ring(e.ring);
  r.next_seq = e.next_seq;
  r.drops_reported = e.drops_reported;
  r.drained_generation = e.generation;
  // release: our reads of the slots below this tail happen-before the producer's acquire of
  // tail, after which it may overwrite them.
  r.tail.store(e.tail, std::memory_order_release);
  if (e.free_after != 0 && r.generation == e.generation) {
    // release: the drainer line above happens-before the next owner's CAS (acquire).
    r.state.store(kRingFree, std::memory_order_release);
  }
}

void CommitJournal::commit(uint32_t count, uint64_t file_end, uint64_t no_ring_reported,
                           uint64_t vfork_reported, uint64_t max_size_dropped,
                           uint64_t unwritten) const {
  SegmentHeader& h = view_.header();
  const JournalEntry* j = entries();
  SPANRING_TEST_POINT("drainer_written_not_committed");
  h.journal_count = count;
  h.journal_end = file_end;
  h.journal_max_size = max_size_dropped;
  h.journal_unwritten = unwritten;
  const uint64_t seq = h.journal_seq.load(std::memory_order_relaxed);
  // release: the entries above are complete before a restarted drainer sees the odd seq.
  h.journal_seq.store(seq + 1, std::memory_order_release);
  SPANRING_TEST_POINT("drainer_journal_pending");
  for (uint32_t i = 0; i < count; ++i) {
    apply(view_, j[i]);
    if (i == 0) SPANRING_TEST_POINT("drainer_journal_half_applied");
  }
  if (no_ring_reported != 0) h.no_ring_reported = no_ring_reported;
  if (vfork_reported != 0) h.vfork_reported = vfork_reported;
  h.max_size_dropped = max_size_dropped;
  h.unwritten = unwritten;
  h.commit_offset.store(file_end, std::memory_order_relaxed);
  // release: a restarted drainer that sees the even seq sees every store above.
  h.journal_seq.store(seq + 2, std::memory_order_release);
  SPANRING_TEST_POINT("drainer_committed");
}

void CommitJournal::set_output(uint64_t dev, uint64_t ino, uint64_t commit_offset) const noexcept {
  SegmentHeader& h = view_.header();
  h.commit_offset.store(commit_offset, std::memory_order_relaxed);
  h.output_dev = dev;
  h.output_ino = ino;
}

const Commit& PendingCommits::seal() {
  queue_.push_back(std::move(open_));
  if (spare_.empty()) {
    open_ = Commit{};
  } else {
    open_ = std::move(spare_.back());
    spare_.pop_back();
  }
  return queue_.back();
}

void PendingCommits::pop() {
  Commit c = std::move(queue_.front());
  queue_.pop_front();
  c.clear();
  spare_.push_back(std::move(c));
}

uint64_t recover(const Segment& segment, const std::string& out_path) {
  const SegmentView& view = segment.view();
  SegmentHeader& h = view.header();
  // acquire: pairs with the release that made the seq odd (the entries are complete) or even.
  const uint64_t jseq = h.journal_seq.load(std::memory_order_acquire);
  if (jseq % 2 == 1) {
    // A drainer died between writing a journal and finishing its commit: the bytes are in the
    // file (the journal is written only after the write completed), so finish the commit.
    const uint32_t count = h.journal_count;  // one read, then bounded by the view
    const uint32_t n = count <= view.ring_count() ? count : 0;
    const JournalEntry* j = view.journal();
    for (uint32_t i = 0; i < n; ++i) CommitJournal::apply(view, j[i]);
    h.max_size_dropped = h.journal_max_size;
    h.unwritten = h.journal_unwritten;
    h.commit_offset.store(h.journal_end, std::memory_order_relaxed);
    h.journal_seq.store(jseq + 1, std::memory_order_release);
  }
  struct stat st {};
  if (::stat(out_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && h.output_ino != 0 &&
      st.st_dev == h.output_dev && st.st_ino == h.output_ino)
    return h.commit_offset.load(std::memory_order_relaxed);
  return 0;
}

}  // namespace spanring
