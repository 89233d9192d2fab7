// The drainer after a failed write, buffer by buffer (drain/drainer.h, "After a failed write"):
// a destination that holds the buffers until the test lets them go, fails the one the test
// says, and refuses (fails unwritten) every later buffer of an epoch at or below a failed one's,
// as UringWriter does. A buffer fails while another one is on its way and a third is being
// filled, all three holding records of a process whose anchor is in the failed one: the anchor
// must be written again, once, before the next span that reaches the file. Real producer
// library, real Drainer with a TextSink, in one process.
#include "drain/drainer.h"
#include "format/text_sink.h"
#include "strace_parser.h"

#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>

#include <unistd.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace spanring;

namespace {

void write_records(int n) {
  for (int i = 0; i < n; ++i) emit("epoch.record", 1'000'000'000 + i, 10, "k=1");
}

// Holds every buffer until release(); the one at `fail_at` (0-based, in submission order)
// fails; later ones of an epoch at or below a failed one's are refused; the rest are "written"
// to file_.
class ScriptedDestination final : public Destination {
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
  void submit(Buffer* b, const Commit&) override { held_.push_back(b); }
  bool collect(int64_t) override {
    if (held_.empty()) return false;
    while (release && !held_.empty()) {
      Buffer* b = held_.front();
      held_.pop_front();
      const uint64_t n = next_++;
      bool failed = false;
      if (b->epoch != 0 && b->epoch <= refused_epoch_) {
        failed = true;
        ++refused;
      } else if (n == fail_at) {
        failed = true;
        if (b->epoch > refused_epoch_) refused_epoch_ = b->epoch;
      } else {
        file.append(b->data.get(), b->len);
      }
      events_->durable(failed, file.size());
    }
    return true;
  }
  size_t in_flight() const noexcept override { return held_.size(); }
  bool eager() const noexcept override { return false; }
  bool finish() override {
    release = true;
    collect(0);
    return true;
  }
  bool release = false;
  uint64_t fail_at = 0;
  uint64_t refused = 0;  // buffers failed by the epoch rule
  std::string file;

 private:
  DestinationEvents* events_ = nullptr;
  std::string name_ = "scripted";
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::deque<Buffer*> held_;
  uint64_t next_ = 0;
  uint64_t refused_epoch_ = 0;
};

}  // namespace

TEST_CASE("a failed write's anchor is written again once, and buffers formatted before the failure was known are not written") {
  const std::string name = "spanring-test-epoch-" + std::to_string(::getpid());
  Segment seg = Segment::create(name, SegmentOptions{4, 16384});
  std::thread t([&] {
    REQUIRE(attach(name.c_str()));
    ScriptedDestination out;
    TextSink sink;
    {
      Drainer drainer(seg, out, sink);
      auto drain = [&] {
        uint64_t n = drainer.poll();
        n += drainer.poll();  // the margin behind the head, now that it stopped
        return n;
      };
      // Buffer 0: the process' anchor and its first records; it will fail.
      write_records(100);
      CHECK(drain() == 100);
      drainer.flush_partial();
      // Buffer 1: more records, on its way when the failure is learned of (refused then).
      write_records(100);
      CHECK(drain() == 100);
      drainer.flush_partial();
      // Buffer 2: being filled when the failure is learned of.
      write_records(50);
      CHECK(drain() == 50);
      CHECK(out.in_flight() == 2);
      out.release = true;
      drainer.wait_for_write(0);  // buffer 0 fails, buffer 1 is refused
      CHECK(out.in_flight() == 0);
      // Records after it: in a buffer of the new epoch, behind the anchor written again.
      write_records(50);
      CHECK(drain() == 50);
      CHECK(drainer.finish(false));
      const DrainStats& s = drainer.stats();
      CHECK(s.written + s.unwritten == 300);
      CHECK(s.unwritten == 250);  // buffers 0, 1 (refused) and 2 (refused)
      CHECK(out.refused == 2);
      const spanring_test::ParsedText parsed = spanring_test::parse_text(out.file);
      CHECK(parsed.errors.empty());
      uint64_t anchors = 0;
      uint64_t spans = 0;
      uint64_t spans_before_anchor = 0;
      for (const auto& l : parsed.lines) {
        if (l.kind == spanring_test::LineKind::kAnchor) ++anchors;
        if (l.kind == spanring_test::LineKind::kSpan) {
          ++spans;
          if (anchors == 0) ++spans_before_anchor;
        }
      }
      CHECK(anchors == 1);
      CHECK(spans_before_anchor == 0);
      CHECK(spans == s.written);
      CHECK(spans == 50);
    }
  });
  t.join();
  Segment::remove(name);
}
