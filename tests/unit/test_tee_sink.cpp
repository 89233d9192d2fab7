// TeeSink (drain/tee_sink.h), in process: driven as the drainer drives a sink, it returns the
// primary sink's bytes unchanged and writes the same events as [STRACE] text to its own file,
// across many text buffers; a failing text file is reported by finish() and leaves the primary
// output alone.
#include "binary/binary_util.h"
#include "drain/tee_sink.h"
#include "drain/uring_writer.h"
#include "format/binary_sink.h"
#include "format/text_sink.h"
#include "mp_util.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace spanring;
using binary_test::make_record;

namespace {

// Drives a sink as the drainer does: buffers framed by begin/end_buffer, a new buffer when the
// next event might not fit. Returns the concatenated buffers.
struct Driver {
  Sink& sink;
  std::vector<char> buf = std::vector<char>(1u << 16);
  size_t len = 0;
  std::string out;

  explicit Driver(Sink& s) : sink(s) { len = sink.begin_buffer(buf.data()); }
  char* room() {
    if (buf.size() - len < sink.max_event_bytes()) {
      sink.end_buffer(buf.data(), len);
      out.append(buf.data(), len);
      len = sink.begin_buffer(buf.data());
    }
    return buf.data() + len;
  }
  std::string finish() {
    sink.end_buffer(buf.data(), len);
    out.append(buf.data(), len);
    return out;
  }
};

// `spans` spans of two threads with every other kind of event around them.
void feed(Driver& d, int spans) {
  Sink& s = d.sink;
  d.len += s.process(d.room(), ProcessEvent{4200, 4200, 100, 200, std::string_view("a\0b", 3)});
  d.len += s.thread(d.room(), ThreadEvent{4200, 4201, "worker"});
  for (int i = 0; i < spans; ++i) {
    const RecordCopy rec = make_record(static_cast<uint64_t>(i), 1000 + static_cast<uint64_t>(i),
                                       7, 1, 0x77, static_cast<uint32_t>(i % 3),
                                       i % 2 ? "node.submit" : "node dispatch",
                                       "run_id=1 task_slot=" + std::to_string(i));
    d.len += s.span(d.room(), SpanEvent::of(4200, 4200 + static_cast<uint32_t>(i % 2), rec));
  }
  d.len += s.drops(d.room(), DropsEvent{4200, 4201, 3, 10, 12, DropReason::kRingFull});
  d.len += s.unfinished(d.room(), UnfinishedEvent{4200, 4201, 1, 0, 9, "open", false, {}});
  d.len += s.undescribed(d.room(), UndescribedEvent{4200, 4201, 2});
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("TeeSink returns the primary's bytes and writes the same events as [STRACE] text") {
  // ~8,000 lines of ~190 bytes: more than one 1 MiB text buffer, so buffers are submitted and
  // recycled while the events go on.
  constexpr int kSpans = 8000;
  BinarySink alone_sink;
  Driver alone(alone_sink);
  feed(alone, kSpans);
  const std::string want_binary = alone.finish();
  TextSink text_sink;
  Driver text(text_sink);
  feed(text, kSpans);
  const std::string want_text = text.finish();
  REQUIRE(want_text.size() > (1u << 20));

  const spanring_test::TempDir tmp;
  const std::string path = tmp.file("tee.strace");
  UringWriter writer(path, 8);
  BinarySink primary;
  TeeSink tee(primary, writer);
  CHECK(tee.max_event_bytes() == primary.max_event_bytes());
  Driver teed(tee);
  feed(teed, kSpans);
  CHECK(teed.finish() == want_binary);
  CHECK(tee.finish());
  CHECK_FALSE(writer.had_error());
  CHECK(spanring_test::read_file(path) == want_text);
}

TEST_CASE("a text file that cannot be written fails finish(), not the primary output") {
  BinarySink alone_sink;
  Driver alone(alone_sink);
  feed(alone, 50);
  const std::string want_binary = alone.finish();

  UringWriter writer("/dev/full", 8);  // every write fails with ENOSPC
  BinarySink primary;
  TeeSink tee(primary, writer);
  Driver teed(tee);
  feed(teed, 50);
  CHECK(teed.finish() == want_binary);
  CHECK_FALSE(tee.finish());
  CHECK(writer.had_error());
}

}  // TEST_SUITE("unit")
