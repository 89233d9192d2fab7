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
#include <string>

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

}  // namespace

TEST_CASE("a poll hands a quarter-filled buffer to an idle file, and keeps less than that") {
  const std::string name = "spanring-test-eager-" + std::to_string(::getpid());
  const std::string path = "/tmp/" + name + ".strace";
  Segment seg = Segment::create(name, SegmentOptions{4, 16384});
  REQUIRE(attach(name.c_str()));
  {
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
  }
  Segment::remove(name);
  ::unlink(path.c_str());
}
