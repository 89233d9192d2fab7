// BufferedWriter (drain/buffered_writer.h), in process: buffers taken from the pool come back
// through on_done in submission order with their file ends, never more than max_buffers exist,
// try_take() gives nothing while all are in flight, a sync marker comes back after every
// earlier buffer, and a file whose writes fail hands every buffer back failed and sync() says
// so.
#include "drain/buffered_writer.h"

#include "drain/diagnostics.h"
#include "mp_util.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace spanring;

namespace {

using spanring_test::read_file;

struct TempPath {
  std::string path;
  TempPath() {
    char p[] = "/tmp/spanring-bufw-XXXXXX";
    const int fd = ::mkstemp(p);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = p;
  }
  ~TempPath() { ::unlink(path.c_str()); }
};

// What on_done saw of one buffer.
struct Done {
  char fill;
  size_t len;
  uint64_t file_end;
  bool failed;
};

// The diagnostics channel's messages while it lives (the writer reports from its own thread).
class DiagnosticsCapture final : public DiagnosticSink {
 public:
  DiagnosticsCapture() : scope_(*this) {}
  void write(std::string_view line) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    text_.append(line);
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 private:
  std::mutex mutex_;
  std::string text_;
  DiagnosticsScope scope_;  // last: ends first, before the text it writes into
};

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("buffers come back through on_done in submission order, never more than the pool") {
  TempPath file;
  UringWriter w(file.path, 2, 0, UringWriter::Fallback::kSynchronous);
  std::vector<Done> done;
  constexpr size_t kBytes = 4096;
  constexpr size_t kMax = 3;
  BufferedWriter out(w, kBytes, kMax, [&](const Buffer& b) {
    done.push_back(Done{b.data[0], b.len, b.file_end, b.failed});
  });
  CHECK(out.buffer_bytes() == kBytes);
  std::set<const Buffer*> seen;
  std::string want;
  for (int i = 0; i < 12; ++i) {
    Buffer* b = out.take();
    seen.insert(b);
    CHECK(b->len == 0);
    CHECK(b->capacity == kBytes);
    const size_t n = 100 + static_cast<size_t>(i) * 300;  // odd sizes, all within the buffer
    std::memset(b->data.get(), 'a' + i, n);
    b->len = n;
    want.append(n, static_cast<char>('a' + i));
    out.submit(b);
    CHECK(out.in_flight() <= kMax);
  }
  CHECK(seen.size() <= kMax);  // the pool's buffers, reused
  CHECK(out.sync());
  CHECK(out.in_flight() == 0);
  REQUIRE(done.size() == 12);
  uint64_t end = 0;
  for (size_t i = 0; i < done.size(); ++i) {
    CHECK(done[i].fill == static_cast<char>('a' + i));
    CHECK_FALSE(done[i].failed);
    end += done[i].len;
    CHECK(done[i].file_end == end);
  }
  CHECK(read_file(file.path) == want);
}

TEST_CASE("try_take gives nothing while every buffer is out; give_back returns one") {
  TempPath file;
  UringWriter w(file.path, 2, 0, UringWriter::Fallback::kSynchronous);
  BufferedWriter out(w, 64, 2);
  Buffer* a = out.try_take();
  Buffer* b = out.try_take();
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a != b);
  CHECK(out.try_take() == nullptr);
  a->len = 10;  // a taken buffer comes back empty
  out.give_back(a);
  Buffer* again = out.try_take();
  CHECK(again == a);
  CHECK(again->len == 0);
  // Submitted, b is in flight until collected; the pool has nothing to give meanwhile.
  std::memset(b->data.get(), 'q', 64);
  b->len = 64;
  out.submit(b);
  CHECK(out.in_flight() == 1);
  CHECK(out.try_take() == nullptr);
  out.give_back(again);
  CHECK(out.sync());
  CHECK(read_file(file.path) == std::string(64, 'q'));
}

TEST_CASE("request_sync does not wait: synced() turns true once the marker is back") {
  TempPath file;
  UringWriter w(file.path, 2, 0, UringWriter::Fallback::kSynchronous);
  int done = 0;
  BufferedWriter out(w, 128, 4, [&](const Buffer&) { ++done; });
  CHECK(out.synced());  // nothing asked yet
  for (int i = 0; i < 3; ++i) {
    Buffer* b = out.take();
    std::memset(b->data.get(), 'x', 128);
    b->len = 128;
    out.submit(b);
  }
  out.request_sync();
  CHECK(out.in_flight() == 4);  // three buffers and the marker
  while (!out.synced()) out.collect(100000);
  CHECK(done == 3);  // every buffer before the marker is back first
  CHECK(out.in_flight() == 0);
  CHECK(read_file(file.path).size() == 3 * 128);
}

TEST_CASE("/dev/full: every buffer comes back failed and sync() says so") {
  std::string err;
  int failed = 0;
  {
    DiagnosticsCapture cap;
    UringWriter w("/dev/full", 2, 0, UringWriter::Fallback::kSynchronous);
    BufferedWriter out(w, 4096, 2, [&](const Buffer& b) { failed += b.failed ? 1 : 0; });
    for (int i = 0; i < 5; ++i) {
      Buffer* b = out.take();  // waits for the failed ones to come back: the pool is 2
      std::memset(b->data.get(), 'z', 4096);
      b->len = 4096;
      out.submit(b);
    }
    CHECK_FALSE(out.sync());
    err = cap.text();
  }
  CHECK(failed == 5);
  CHECK(err.find("writing /dev/full failed: No space left on device") != std::string::npos);
}

}  // TEST_SUITE("unit")
