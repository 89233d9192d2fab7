// CommitJournal and recover() (drain/journal.h): a commit applies each entry to its ring's
// drainer line and records the file end; a journal left pending by a killed drainer is finished
// by recover(); entries and counts read back from the segment are bounded by the view.
#include <doctest/doctest.h>

#include "drain/journal.h"

#include <spanring/segment.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

using namespace spanring;

namespace {

struct TestSegment {
  std::string name;
  Segment seg;
  explicit TestSegment(const char* what)
      : name("spanring-test-journal-" + std::to_string(::getpid()) + "-" + what),
        seg(Segment::create(name, SegmentOptions{4, 16})) {}
  ~TestSegment() { Segment::remove(name); }
};

}  // namespace

TEST_CASE("a commit moves each journalled ring's drainer line and then the commit offset") {
  TestSegment ts("commit");
  const SegmentView& v = ts.seg.view();
  v.ring(1).generation = 5;
  v.ring(1).state.store(kRingReleased);
  v.ring(2).generation = 9;
  v.ring(2).state.store(kRingActive);
  const CommitJournal journal(v);
  JournalEntry* j = journal.entries();
  j[0] = JournalEntry{1, 5, 40, 17, 3, 1, 0};   // owner gone and written: free ring 1
  j[1] = JournalEntry{2, 9, 12, 6, 0, 0, 0};    // ring 2 goes on
  const uint64_t seq0 = v.header().journal_seq.load();
  journal.commit(2, 4096, 7, 0, 21, 9);

  CHECK(v.ring(1).tail.load() == 40);
  CHECK(v.ring(1).next_seq == 17);
  CHECK(v.ring(1).drops_reported == 3);
  CHECK(v.ring(1).drained_generation == 5);
  CHECK(v.ring(1).state.load() == kRingFree);
  CHECK(v.ring(2).tail.load() == 12);
  CHECK(v.ring(2).next_seq == 6);
  CHECK(v.ring(2).state.load() == kRingActive);
  CHECK(v.ring(0).tail.load() == 0);  // not journalled, not touched
  CHECK(v.header().commit_offset.load() == 4096);
  CHECK(v.header().journal_end == 4096);
  CHECK(v.header().journal_count == 2);
  CHECK(v.header().no_ring_reported == 7);
  CHECK(v.header().vfork_reported == 0);
  CHECK(v.header().journal_max_size == 21);
  CHECK(v.header().max_size_dropped == 21);
  CHECK(v.header().journal_unwritten == 9);
  CHECK(v.header().unwritten == 9);
  CHECK(v.header().journal_seq.load() == seq0 + 2);  // even: done
}

TEST_CASE("an entry frees its ring only while the ring still has the entry's owner") {
  TestSegment ts("generation");
  const SegmentView& v = ts.seg.view();
  v.ring(3).generation = 2;  // a new owner claimed it since the entry was written
  v.ring(3).state.store(kRingActive);
  CommitJournal::apply(v, JournalEntry{3, 1, 8, 4, 0, 1, 0});
  CHECK(v.ring(3).tail.load() == 8);
  CHECK(v.ring(3).state.load() == kRingActive);
}

TEST_CASE("an entry naming no ring of the segment is ignored") {
  TestSegment ts("bounds");
  const SegmentView& v = ts.seg.view();
  CommitJournal::apply(v, JournalEntry{4, 1, 8, 4, 0, 1, 0});
  CommitJournal::apply(v, JournalEntry{UINT32_MAX, 1, 8, 4, 0, 1, 0});
  for (uint32_t i = 0; i < v.ring_count(); ++i) CHECK(v.ring(i).tail.load() == 0);
}

TEST_CASE("recover() finishes a pending journal and keeps the committed bytes of the same file") {
  TestSegment ts("recover");
  const SegmentView& v = ts.seg.view();
  const std::string path = "/tmp/spanring-test-journal-" + std::to_string(::getpid()) + ".out";
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("0123456789", f);
  std::fclose(f);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  SegmentHeader& h = v.header();
  h.output_dev = st.st_dev;
  h.output_ino = st.st_ino;
  h.commit_offset.store(4);

  SUBCASE("a pending journal: applied, and its end becomes the commit offset") {
    v.ring(0).generation = 1;
    v.journal()[0] = JournalEntry{0, 1, 30, 11, 0, 0, 0};
    h.journal_count = 1;
    h.journal_end = 8;
    h.journal_max_size = 5;  // the killed drainer had counted 5 records past --max-size
    h.max_size_dropped = 2;
    h.journal_unwritten = 40;  // ... and 40 records whose write failed
    h.unwritten = 12;
    h.journal_seq.store(3);  // odd: the killed drainer had not finished
    CHECK(recover(ts.seg, path) == 8);
    CHECK(v.ring(0).tail.load() == 30);
    CHECK(h.max_size_dropped == 5);
    CHECK(h.unwritten == 40);
    CHECK(h.journal_seq.load() == 4);
  }
  SUBCASE("a journal count past the ring count is not followed") {
    v.journal()[0] = JournalEntry{0, 1, 30, 11, 0, 0, 0};
    h.journal_count = 1u << 30;
    h.journal_end = 8;
    h.journal_seq.store(1);
    CHECK(recover(ts.seg, path) == 8);
    CHECK(v.ring(0).tail.load() == 0);
  }
  SUBCASE("nothing pending: the commit offset as it is") {
    CHECK(recover(ts.seg, path) == 4);
  }
  SUBCASE("another file starts empty") {
    CHECK(recover(ts.seg, path + ".other") == 0);
  }
  ::unlink(path.c_str());
}

TEST_CASE("a Commit journals the tails of live owners only, with its counters") {
  TestSegment ts("commit_of");
  const SegmentView& v = ts.seg.view();
  v.ring(0).generation = 3;
  v.ring(0).state.store(kRingActive);
  v.ring(1).generation = 4;
  v.ring(1).state.store(kRingReleased);
  Commit c;
  c.tails.push_back(TailUpdate{0, 3, 20, 9, 1, false, 100, 101, 0});
  c.tails.push_back(TailUpdate{1, 4, 8, 5, 0, true, 100, 102, 0});  // re-adopted since: skipped
  c.no_ring_reported = 6;
  c.vfork_reported = 2;
  c.max_size_dropped = 0;
  const CommitJournal journal(v);
  journal.commit(c, 512, [](const TailUpdate& t) { return t.ring == 0; });
  CHECK(v.header().journal_count == 1);
  CHECK(v.ring(0).tail.load() == 20);
  CHECK(v.ring(0).next_seq == 9);
  CHECK(v.ring(0).drops_reported == 1);
  CHECK(v.ring(1).tail.load() == 0);
  CHECK(v.ring(1).state.load() == kRingReleased);  // not freed: its entry was not live
  CHECK(v.header().commit_offset.load() == 512);
  CHECK(v.header().no_ring_reported == 6);
  CHECK(v.header().vfork_reported == 2);
}

TEST_CASE("set_output names the file and its committed bytes") {
  TestSegment ts("set_output");
  const CommitJournal journal(ts.seg.view());
  journal.set_output(7, 99, 4096);
  const SegmentHeader& h = ts.seg.view().header();
  CHECK(h.output_dev == 7);
  CHECK(h.output_ino == 99);
  CHECK(h.commit_offset.load() == 4096);
  journal.set_output(0, 0, 0);  // no file (the flight recorder)
  CHECK(h.output_ino == 0);
  CHECK(h.commit_offset.load() == 0);
}

TEST_CASE("PendingCommits: handed-over commits leave in order, their storage is reused") {
  PendingCommits p;
  CHECK(p.empty());
  p.open().records = 3;
  p.open().tails.push_back(TailUpdate{1, 1, 10, 4, 0, false, 7, 7, 0});
  const Commit& a = p.seal();
  CHECK(a.records == 3);
  CHECK(a.tails.size() == 1);
  CHECK(p.open().records == 0);  // the next buffer's commit starts empty
  CHECK(p.open().tails.empty());
  p.open().records = 5;
  p.seal();
  CHECK(p.size() == 2);
  CHECK(p.front().records == 3);
  p.pop();
  CHECK(p.front().records == 5);
  p.pop();
  CHECK(p.empty());
  // A popped commit's vectors come back as a later open one: cleared, capacity kept.
  PendingCommits q;
  q.open().tails.push_back(TailUpdate{2, 1, 10, 4, 0, false, 7, 7, 0});
  q.open().records = 9;
  q.seal();
  q.pop();
  q.seal();  // the (empty) open commit goes; the popped one's storage is open now
  CHECK(q.open().tails.empty());
  CHECK(q.open().records == 0);
  CHECK(q.open().tails.capacity() >= 1);
}
