// FlightRecorder (drain/flight_recorder.h) in one process: blocks framed as the drainer's
// FlightSink frames them go into a 1 MiB window; snapshots are written to a temporary directory
// and read back with the binary reader. The window stays within SIZE after every block, a
// snapshot's overwritten range for an owner is exactly the sequence numbers before its first
// one in the window, and owners that come and go (thread churn) leave bounded metadata. As the
// drainer's Destination, each block handed over is durable at once and a process pushed out of
// the window is forgotten.
// The recorder under a real drainer and real processes: fault_drainer/test_mp_flight_recorder.cpp.
#include "binary/binary_util.h"
#include "drain/flight_recorder.h"
#include "format/binary_reader.h"
#include "format/convert_io.h"
#include "mp_util.h"

#include <spanring/error.h>

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace spanring;

namespace {

constexpr uint64_t kSize = 1u << 20;

// A block as the drainer hands it over: spans [from, to) of owner (pid, tid), seq= attributes.
std::string block_of(uint32_t pid, uint32_t tid, uint64_t from, uint64_t to) {
  BinarySink sink(false, 0);
  std::string b(1u << 20, '\0');
  size_t len = sink.begin_buffer(b.data());
  for (uint64_t s = from; s < to; ++s) {
    const std::string attrs = "seq=" + std::to_string(s);
    const RecordCopy rec = binary_test::make_record(s, 1000 + s, 10, 0, 0, 0, "fr.span", attrs);
    len += sink.span(b.data() + len, SpanEvent::of(pid, tid, rec));
  }
  sink.end_buffer(b.data(), len);
  b.resize(len);
  return b;
}

struct Seen final : EventVisitor {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> spans;
  std::vector<DropsEvent> drop_events;
  std::set<uint32_t> processes;
  std::set<std::pair<uint32_t, uint32_t>> threads;
  std::vector<std::string> order;  // event kinds in file order
  void process(const ProcessEvent& e) override {
    processes.insert(e.pid);
    order.push_back("process");
  }
  void thread(const ThreadEvent& e) override {
    threads.insert({e.pid, e.tid});
    order.push_back("thread");
  }
  void span(const SpanEvent& e) override {
    spans[{e.pid, e.tid}].push_back(e.record->header.seq);
    order.push_back("span");
  }
  void drops(const DropsEvent& e) override {
    drop_events.push_back(e);
    order.push_back("drops");
  }
};

ReadResult take_snapshot(FlightRecorder& fr, const std::string& path, Seen& seen) {
  fr.request(SnapshotRequest{path, "test", -1});
  REQUIRE(fr.pending());
  fr.start_next();
  while (fr.pump(100000)) {
  }
  REQUIRE(!fr.busy());
  TraceInput in = TraceInput::open(path);
  return read_binary_trace(in, seen);
}

}  // namespace

TEST_CASE("the window keeps the newest whole blocks within SIZE, and a snapshot says exactly "
          "which sequence numbers were pushed out") {
  spanring_test::TempDir tmp;
  FlightRecorder fr(kSize, UringWriter::Fallback::kSynchronous);
  CHECK(fr.block_bytes() == kSize / 8);
  fr.process(ProcessEvent{100, 100, 5, 6, std::string_view("prog\0arg", 8)});
  fr.thread(ThreadEvent{100, 101, "worker"});
  uint64_t seq = 0;
  constexpr uint64_t kPerBlock = 1000;  // ~80 KB of spans: under block_bytes()
  for (int b = 0; b < 40; ++b) {
    const std::string blk = block_of(100, 101, seq, seq + kPerBlock);
    REQUIRE(blk.size() <= fr.block_bytes());
    seq += kPerBlock;
    fr.keep(blk.data(), blk.size(), kPerBlock, {FlightOwnerMark{0, 1, 100, 101, 0, seq, false}},
            0, 0);
    CHECK(fr.bytes_in_use() <= kSize);
  }
  // 40 blocks of ~80 KB went in; about twelve fit.
  CHECK(fr.blocks() >= 10);
  CHECK(fr.blocks() <= 13);

  Seen seen;
  const ReadResult r = take_snapshot(fr, tmp.file("a.sptrace"), seen);
  INFO(r.message);
  CHECK(r.status == ReadResult::Status::kComplete);
  CHECK(r.format == "spanring binary trace v4");
  CHECK(seen.processes == std::set<uint32_t>{100});
  CHECK(seen.threads == std::set<std::pair<uint32_t, uint32_t>>{{100, 101}});
  const std::vector<uint64_t>& spans = seen.spans[{100, 101}];
  REQUIRE(spans.size() == fr.blocks() * kPerBlock);
  const uint64_t window_first = spans.front();
  for (size_t i = 0; i < spans.size(); ++i) CHECK(spans[i] == window_first + i);
  CHECK(spans.back() == seq - 1);
  REQUIRE(seen.drop_events.size() == 1);
  const DropsEvent& d = seen.drop_events[0];
  CHECK(d.reason == DropReason::kOverwritten);
  CHECK(d.pid == 100);
  CHECK(d.tid == 101);
  CHECK(d.first_seq == 0);
  CHECK(d.last_seq == window_first - 1);
  CHECK(d.dropped == window_first);
  // Metadata first, then the overwritten range, then the window.
  CHECK(seen.order[0] == "process");
  CHECK(seen.order[1] == "thread");
  CHECK(seen.order[2] == "drops");
  CHECK(seen.order[3] == "span");
}

TEST_CASE("owners that come and go leave bounded metadata: the newest 1,024 gone owners as "
          "ranges, older ones summed, their processes forgotten") {
  spanring_test::TempDir tmp;
  FlightRecorder fr(kSize, UringWriter::Fallback::kSynchronous);
  constexpr uint32_t kOwners = 5000;
  constexpr uint64_t kEach = 5;
  const std::string cmdline(3000, 'c');  // a long command line per process
  uint64_t max_in_use = 0;
  for (uint32_t i = 0; i < kOwners; ++i) {
    const uint32_t pid = 1000 + i;
    fr.process(ProcessEvent{pid, pid, 1, 2, cmdline});
    fr.thread(ThreadEvent{pid, pid, "t"});
    const std::string blk = block_of(pid, pid, 0, kEach);
    // The owner's ring is freed after this block (last): it never comes back.
    fr.keep(blk.data(), blk.size(), kEach, {FlightOwnerMark{i % 8, i, pid, pid, 0, kEach, true}},
            0, 0);
    max_in_use = std::max(max_in_use, fr.bytes_in_use());
  }
  CHECK(max_in_use <= kSize);
  const std::vector<uint32_t> forgotten = fr.take_forgotten_pids();
  CHECK(forgotten.size() > kOwners / 2);
  CHECK(std::set<uint32_t>(forgotten.begin(), forgotten.end()).size() == forgotten.size());
  CHECK(fr.take_forgotten_pids().empty());

  Seen seen;
  const ReadResult r = take_snapshot(fr, tmp.file("churn.sptrace"), seen);
  INFO(r.message);
  CHECK(r.status == ReadResult::Status::kComplete);
  // Owners in the window: all their records, and their process and thread described.
  uint64_t in_window = 0;
  for (const auto& [owner, seqs] : seen.spans) {
    ++in_window;
    CHECK(seqs == std::vector<uint64_t>{0, 1, 2, 3, 4});
    CHECK(seen.processes.count(owner.first) == 1);
    CHECK(seen.threads.count(owner) == 1);
  }
  CHECK(in_window > 0);
  // Gone owners: the newest 1,024 one by one (whole range), the rest summed under pid 0.
  uint64_t ranges = 0;
  uint64_t summed = 0;
  for (const DropsEvent& d : seen.drop_events) {
    REQUIRE(d.reason == DropReason::kOverwritten);
    if (d.pid == 0) {
      summed += d.dropped;
      continue;
    }
    ++ranges;
    CHECK(d.first_seq == 0);
    CHECK(d.last_seq == kEach - 1);
    CHECK(seen.spans.count({d.pid, d.tid}) == 0);
  }
  CHECK(ranges == FlightRecorder::kMaxGoneOwners);
  CHECK(in_window + ranges + summed / kEach == kOwners);
  CHECK(summed % kEach == 0);
}

TEST_CASE("a snapshot that cannot be written is refused with the reason, and the next one works") {
  spanring_test::TempDir tmp;
  FlightRecorder fr(kSize, UringWriter::Fallback::kSynchronous);
  const std::string blk = block_of(7, 7, 0, 10);
  fr.keep(blk.data(), blk.size(), 10, {FlightOwnerMark{0, 1, 7, 7, 0, 10, false}}, 0, 0);
  fr.request(SnapshotRequest{tmp.file("no/such/dir/x.sptrace"), "test", -1});
  fr.start_next();
  CHECK(!fr.busy());
  CHECK(fr.snapshots_written() == 0);
  Seen seen;
  const ReadResult r = take_snapshot(fr, tmp.file("ok.sptrace"), seen);
  CHECK(r.status == ReadResult::Status::kComplete);
  CHECK(fr.snapshots_written() == 1);
  CHECK(seen.spans[{7, 7}].size() == 10);
  CHECK(seen.drop_events.empty());  // nothing was pushed out
}

TEST_CASE("a size outside 1 MiB .. 64 GiB is refused") {
  CHECK_THROWS_AS(FlightRecorder((1u << 20) - 1, UringWriter::Fallback::kSynchronous), Error);
  CHECK_THROWS_AS(FlightRecorder((uint64_t{64} << 30) + 1, UringWriter::Fallback::kSynchronous),
                  Error);
}

TEST_CASE("blocks a snapshot has not copied yet are never pushed out: the window waits for it, "
          "and the snapshot is the window as it was when it began") {
  spanring_test::TempDir tmp;
  // 16 MiB: more than the four 1 MiB write buffers a snapshot copies at a time.
  constexpr uint64_t kBig = 16u << 20;
  FlightRecorder fr(kBig, UringWriter::Fallback::kSynchronous);
  fr.thread(ThreadEvent{9, 9, "w"});
  uint64_t seq = 0;
  constexpr uint64_t kPerBlock = 1000;
  auto keep_blocks = [&](int n) {
    for (int b = 0; b < n; ++b) {
      const std::string blk = block_of(9, 9, seq, seq + kPerBlock);
      seq += kPerBlock;
      fr.keep(blk.data(), blk.size(), kPerBlock, {FlightOwnerMark{0, 1, 9, 9, 0, seq, false}},
              0, 0);
      CHECK(fr.bytes_in_use() <= kBig);
    }
  };
  keep_blocks(300);
  const uint64_t newest_at_start = seq - 1;
  const uint64_t blocks_at_start = fr.blocks();
  fr.request(SnapshotRequest{tmp.file("pinned.sptrace"), "test", -1});
  fr.start_next();  // copies what four buffers hold; the rest of the window is pinned
  REQUIRE(fr.busy());
  keep_blocks(300);  // pushes out the whole window of the start, pinned blocks included
  while (fr.pump(100000)) {
  }
  Seen seen;
  TraceInput in = TraceInput::open(tmp.file("pinned.sptrace"));
  const ReadResult r = read_binary_trace(in, seen);
  CHECK(r.status == ReadResult::Status::kComplete);
  const std::vector<uint64_t>& spans = seen.spans[{9, 9}];
  REQUIRE(spans.size() == blocks_at_start * kPerBlock);
  CHECK(spans.back() == newest_at_start);
  for (size_t i = 0; i < spans.size(); ++i) CHECK(spans[i] == spans.front() + i);
  REQUIRE(seen.drop_events.size() == 1);
  CHECK(seen.drop_events[0].first_seq == 0);
  CHECK(seen.drop_events[0].last_seq == spans.front() - 1);
}

TEST_CASE("as the drainer's Destination: each block is kept and durable at once; a process "
          "pushed out is forgotten") {
  spanring_test::TempDir tmp;
  FlightRecorder fr(kSize, UringWriter::Fallback::kSynchronous);
  struct Events final : DestinationEvents {
    int durable_calls = 0;
    int new_files = 0;
    std::vector<uint32_t> forgotten;
    void durable(bool failed, uint64_t end) override {
      CHECK_FALSE(failed);
      CHECK(end == 0);  // no file
      ++durable_calls;
    }
    void new_file(uint64_t, uint64_t) override { ++new_files; }
    void forget_process(uint32_t pid) override { forgotten.push_back(pid); }
  } ev;
  fr.attach(ev, 100);
  CHECK(fr.dev() == 0);
  CHECK(fr.ino() == 0);
  CHECK(fr.kept_bytes() == 0);
  CHECK(fr.in_flight() == 0);
  CHECK_FALSE(fr.collect(0));
  int submitted = 0;
  // Spans [from, to) of owner (ring, generation 1, pid = tid), its state after them in the
  // Commit, as Drainer::submit_current hands them over.
  auto submit = [&](uint32_t ring, uint32_t pid, uint64_t from, uint64_t to, bool last) {
    Buffer* b = fr.take();
    REQUIRE(b->capacity == fr.block_bytes());
    const std::string blk = block_of(pid, pid, from, to);
    REQUIRE(blk.size() <= b->capacity);
    std::memcpy(b->data.get(), blk.data(), blk.size());
    b->len = blk.size();
    Commit c;
    c.records = to - from;
    c.tails.push_back(TailUpdate{ring, 1, 0, to, 0, last, pid, pid, from});
    fr.submit(b, c);
    ++submitted;
    CHECK(ev.durable_calls == submitted);  // at once, from inside submit()
  };
  submit(0, 50, 0, 10, true);  // pid 50's only block, its owner gone after it
  CHECK(fr.blocks() == 1);
  uint64_t seq = 0;
  while (ev.forgotten.empty() && seq < 100000) {
    submit(1, 60, seq, seq + 1000, false);
    seq += 1000;
  }
  CHECK(ev.forgotten == std::vector<uint32_t>{50});
  CHECK(ev.new_files == 0);
  CHECK(fr.finish());
  Seen seen;
  const ReadResult r = take_snapshot(fr, tmp.file("dest.sptrace"), seen);
  CHECK(r.status == ReadResult::Status::kComplete);
  CHECK(seen.spans.count({50, 50}) == 0);  // pushed out ...
  bool said = false;                       // ... and reported as overwritten, exactly
  for (const DropsEvent& d : seen.drop_events)
    if (d.pid == 50 && d.reason == DropReason::kOverwritten)
      said = d.dropped == 10 && d.first_seq == 0 && d.last_seq == 9;
  CHECK(said);
}
