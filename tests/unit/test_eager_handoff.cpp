// The drainer's hand-off of a partly filled buffer (Drainer::poll, Destination::eager): to a
// file, a poll that finds nothing on its way there hands over the buffer once a quarter of it
// is filled, so that the rings' tails move a write after their records were read, not once a
// 1 MiB buffer is full (a producer at 4 M records/s fills one in ~4 ms, a quarter of a default
// ring). Less than a quarter stays in the buffer (a poll woken by each returning write would
// otherwise hand over a few records each time). Real producer library, real Drainer writing a
// [STRACE] file through OutputFiles, in one process.
#include "drain/drainer.h"
#include "drain/output_files.h"
#include "format/text_sink.h"

#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace spanring;

namespace {

// One-slot records of about 100 bytes of text each (a literal name, literal attribute text,
// caller-supplied times).
void write_records(int n) {
  for (int i = 0; i < n; ++i) emit("eager.handoff", 1'000'000'000 + i, 10, "k=1 v=22");
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Runs `body` in a thread of its own: its ring is released when it exits, so that the next test
// case can attach this process to another segment.
template <class F>
void in_thread(F&& body) {
  std::thread t(std::forward<F>(body));
  t.join();
}

// A destination whose buffers stay on their way until the test lets them go: what a poll does
// while earlier buffers are still being written.
class HeldDestination final : public Destination {
 public:
  static constexpr size_t kBytes = 1u << 20;
  void attach(DestinationEvents& events, size_t) override { events_ = &events; }
  uint64_t dev() const noexcept override { return 0; }
  uint64_t ino() const noexcept override { return 0; }
  uint64_t kept_bytes() const noexcept override { return 0; }
  const std::string& name() const noexcept override { return name_; }
  Buffer* take() override {
    auto b = std::make_unique<Buffer>();
    b->data = std::make_unique<char[]>(kBytes);
    b->capacity = kBytes;
    buffers_.push_back(std::move(b));
    return buffers_.back().get();
  }
  Buffer* take_closing() override { return take(); }
  void give_back(Buffer*) noexcept override {}
  void submit(Buffer* b, const Commit&) override {
    held_.push_back(b);
    ++submitted;
  }
  bool collect(int64_t) override {
    if (held_.empty()) return false;
    while (release && !held_.empty()) {
      held_.pop_front();
      events_->durable(false, 0);
    }
    return true;
  }
  size_t in_flight() const noexcept override { return held_.size(); }
  bool eager() const noexcept override { return true; }
  bool finish() override {
    release = true;
    collect(0);
    return true;
  }
  bool release = false;  // collect() reports the held buffers durable
  uint64_t submitted = 0;

 private:
  DestinationEvents* events_ = nullptr;
  std::string name_ = "held";
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::deque<Buffer*> held_;
};

}  // namespace

TEST_CASE("a poll hands a quarter-filled buffer to an idle file, and keeps less than that") {
  const std::string name = "spanring-test-eager-" + std::to_string(::getpid());
  const std::string path = "/tmp/" + name + ".strace";
  Segment seg = Segment::create(name, SegmentOptions{4, 16384});
  in_thread([&] {
    REQUIRE(attach(name.c_str()));
    OutputFiles out(path, 0, UringWriter::Fallback::kSynchronous, OutputLimits{});
    REQUIRE(out.eager());
    TextSink sink;
    Drainer drainer(seg, out, sink);

    // A few records: far less than a quarter of a buffer. Read, kept in the buffer.
    write_records(100);
    uint64_t read = drainer.poll();
    read += drainer.poll();  // the margin behind the head, now that it stopped
    CHECK(read == 100);
    CHECK(out.in_flight() == 0);
    CHECK_FALSE(drainer.wait_for_write(1000));  // nothing on its way
    CHECK(file_size(path) == 0);

    // Enough for a quarter of the buffer: handed over by the poll that read them (all but the
    // margin behind the moving head).
    const uint64_t quarter_records = OutputFiles::kBufferBytes / 4 / 80 + 1;  // lines > 80 B
    write_records(static_cast<int>(quarter_records));
    const uint64_t first = drainer.poll();
    CHECK(first >= quarter_records - Drainer::kHeadMarginSlots - 1);
    CHECK(out.in_flight() + (file_size(path) != 0 ? 1 : 0) >= 1);
    // The rest: read into the next buffer, which a write in flight or its size keeps.
    CHECK(drainer.poll() == quarter_records - first);
    // The write comes back and is committed: the file holds the lines, the ring's tail moved
    // over the records of the handed-over buffer.
    while (out.in_flight() != 0) drainer.wait_for_write(100000);
    CHECK(file_size(path) >= OutputFiles::kBufferBytes / 4);
    uint64_t tails = 0;
    for (uint32_t i = 0; i < seg.ring_count(); ++i)
      tails += seg.ring(i).tail.load(std::memory_order_acquire);
    CHECK(tails == 100 + first);
    CHECK(drainer.finish(false));
  });
  Segment::remove(name);
  ::unlink(path.c_str());
}

TEST_CASE("records read while most of the ring is on its way to the file stay in the buffer "
          "until a quarter of the ring is in it") {
  const std::string name = "spanring-test-held-" + std::to_string(::getpid());
  constexpr uint32_t kSlots = 16384;  // a quarter: 4,096 one-slot records
  Segment seg = Segment::create(name, SegmentOptions{4, kSlots});
  in_thread([&] {
    REQUIRE(attach(name.c_str()));
    HeldDestination out;
    TextSink sink;
    Drainer drainer(seg, out, sink);
    // More than a quarter of the ring: read and handed over, and held on its way.
    write_records(5000);
    CHECK(drainer.poll() + drainer.poll() == 5000);
    CHECK(out.submitted == 1);
    CHECK(out.in_flight() == 1);
    // A few more records while those 5,000 slots wait for the file: read into the next buffer
    // and kept there (handing them over would make a write of a few lines each time).
    write_records(10);
    CHECK(drainer.poll() + drainer.poll() == 10);
    CHECK(out.submitted == 1);
    // A quarter of the ring in this buffer: handed over at once, whatever is in flight.
    write_records(kSlots / 4);
    CHECK(drainer.poll() + drainer.poll() == kSlots / 4);
    CHECK(out.submitted == 2);
    CHECK(drainer.finish(false));
    uint64_t tails = 0;
    for (uint32_t i = 0; i < seg.ring_count(); ++i)
      tails += seg.ring(i).tail.load(std::memory_order_acquire);
    CHECK(tails == 5010 + kSlots / 4);
  });
  Segment::remove(name);
}
