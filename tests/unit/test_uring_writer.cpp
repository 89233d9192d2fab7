// UringWriter (drain/uring_writer.h), in process: buffers land in a temp file at their offsets
// in submit order and come back in that order; a kept prefix is cut to and appended after;
// output into a pipe arrives whole and in order; a write cut short by the file size limit is
// finished where it can be and then reported, the file cut back to its last whole buffer;
// /dev/full reports ENOSPC once (through the diagnostics channel) and hands every buffer back as failed.
#include "drain/uring_writer.h"

#include "drain/diagnostics.h"
#include "mp_util.h"

#include <spanring/error.h>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace spanring;

namespace {

using spanring_test::read_file;

struct TempPath {
  std::string path;
  explicit TempPath(const std::string& content = {}) {
    char p[] = "/tmp/spanring-uring-XXXXXX";
    const int fd = ::mkstemp(p);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    ::close(fd);
    path = p;
  }
  ~TempPath() { ::unlink(path.c_str()); }
};

// A buffer holding `bytes` copies of `fill`.
std::unique_ptr<Buffer> make_buffer(size_t bytes, char fill) {
  auto b = std::make_unique<Buffer>();
  b->data = std::make_unique<char[]>(bytes);
  b->capacity = bytes;
  b->len = bytes;
  std::fill(b->data.get(), b->data.get() + bytes, fill);
  return b;
}

// Submits every buffer, then takes them all back; returns them in the order they came back.
std::vector<Buffer*> write_all(UringWriter& w, const std::vector<std::unique_ptr<Buffer>>& bufs) {
  for (const auto& b : bufs) w.submit(b.get());
  std::vector<Buffer*> back;
  while (back.size() < bufs.size())
    if (Buffer* b = w.take_done(1000000)) back.push_back(b);
  return back;
}

// Waits for everything submitted to be in the file, fsynced.
void sync(UringWriter& w) {
  Buffer marker;
  marker.sync = true;
  w.submit(&marker);
  while (w.take_done(1000000) != &marker) {
  }
}

// The diagnostics channel's messages (drain/diagnostics.h) while it lives: the writer reports
// from its own thread, hence the mutex.
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

TEST_CASE("buffers land at their offsets in submit order and come back in that order") {
  TempPath file;
  UringWriter w(file.path, 4);  // fewer slots than buffers: some wait for room in flight
  CHECK(w.seekable());
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::string want;
  for (int i = 0; i < 20; ++i) {
    const size_t n = 1000 + static_cast<size_t>(i) * 4099;  // odd sizes: offsets not aligned
    bufs.push_back(make_buffer(n, static_cast<char>('a' + i)));
    want.append(n, static_cast<char>('a' + i));
  }
  bufs[7]->len = 0;  // an empty buffer completes without a write, in its place
  want.erase(want.find('h'), bufs[7]->capacity);
  const std::vector<Buffer*> back = write_all(w, bufs);
  uint64_t end = 0;
  for (size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i] == bufs[i].get());
    CHECK_FALSE(back[i]->failed);
    end += back[i]->len;
    CHECK(back[i]->file_end == end);  // the file holds every buffer up to this one
  }
  sync(w);
  CHECK(w.bytes_written() == want.size());
  CHECK_FALSE(w.had_error());
  CHECK(read_file(file.path) == want);
}

TEST_CASE("a kept prefix is cut to and appended after") {
  TempPath file(std::string(600, 'k') + std::string(400, 'x'));  // 400 uncommitted bytes
  UringWriter w(file.path, 8, 600);
  std::vector<std::unique_ptr<Buffer>> bufs;
  bufs.push_back(make_buffer(100, 'n'));
  const std::vector<Buffer*> back = write_all(w, bufs);
  CHECK(back[0]->file_end == 700);
  sync(w);
  CHECK(read_file(file.path) == std::string(600, 'k') + std::string(100, 'n'));
}

TEST_CASE("a kept prefix longer than the file is refused") {
  TempPath file("short");
  CHECK_THROWS_AS(UringWriter(file.path, 8, 6), Error);
  try {
    UringWriter w(file.path, 8, 6);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("shorter than") != std::string::npos);
  }
  CHECK(read_file(file.path) == "short");  // not cut
}

TEST_CASE("an output that cannot be opened is refused with its errno") {
  try {
    UringWriter w("/nonexistent-dir/spanring-out", 8);
    FAIL("opened a file in a missing directory");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNotFound);
    CHECK(e.err() == ENOENT);
  }
}

TEST_CASE("pipe output: no offsets, every byte in order") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  });
  std::string want;
  {
    UringWriter w("/proc/self/fd/" + std::to_string(fds[1]), 8);
    CHECK_FALSE(w.seekable());
    std::vector<std::unique_ptr<Buffer>> bufs;
    for (int i = 0; i < 6; ++i) {
      // Larger than a pipe holds (64 KiB): each write makes progress a piece at a time.
      bufs.push_back(make_buffer(300000 + static_cast<size_t>(i), static_cast<char>('0' + i)));
      want.append(bufs.back()->len, static_cast<char>('0' + i));
    }
    const std::vector<Buffer*> back = write_all(w, bufs);
    for (size_t i = 0; i < back.size(); ++i) {
      CHECK(back[i] == bufs[i].get());
      CHECK_FALSE(back[i]->failed);
    }
    CHECK_FALSE(w.had_error());
  }
  ::close(fds[1]);  // the writer closed its own descriptor: now the reader sees the end
  reader.join();
  ::close(fds[0]);
  CHECK(got.size() == want.size());
  CHECK(got == want);
}

TEST_CASE("a write cut short by the file size limit: the rest fails, the file ends whole") {
  // RLIMIT_FSIZE makes the kernel write up to the limit (a short write) and refuse the rest
  // with EFBIG; SIGXFSZ is ignored so that the process lives to see it.
  struct sigaction ign {}, old {};
  ign.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGXFSZ, &ign, &old) == 0);
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  TempPath file;
  std::string err;
  std::vector<Buffer*> back;
  std::vector<std::unique_ptr<Buffer>> bufs;
  {
    DiagnosticsCapture cap;
    {
      UringWriter w(file.path, 1);  // one write in flight: the limit falls inside buffer 1
      rlimit lim = saved;
      lim.rlim_cur = 150000;
      REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
      bufs.push_back(make_buffer(100000, 'a'));
      bufs.push_back(make_buffer(100000, 'b'));  // 50,000 bytes fit, then EFBIG
      bufs.push_back(make_buffer(100000, 'c'));  // aimed past the hole: failed too
      back = write_all(w, bufs);
      CHECK(w.had_error());
      CHECK(w.bytes_written() == 100000);
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    err = cap.text();
  }
  ::sigaction(SIGXFSZ, &old, nullptr);
  REQUIRE(back.size() == 3);
  CHECK_FALSE(back[0]->failed);
  CHECK(back[1]->failed);
  CHECK(back[2]->failed);
  CHECK(back[1]->file_end == 100000);
  CHECK(read_file(file.path) == std::string(100000, 'a'));  // cut back: no half buffer
  CHECK(err.find("File too large") != std::string::npos);
}

TEST_CASE("/dev/full: ENOSPC is reported once and every buffer comes back failed") {
  std::string err;
  {
    DiagnosticsCapture cap;
    UringWriter w("/dev/full", 8);
    CHECK_FALSE(w.seekable());
    std::vector<std::unique_ptr<Buffer>> bufs;
    for (int i = 0; i < 3; ++i) bufs.push_back(make_buffer(4096, 'z'));
    const std::vector<Buffer*> back = write_all(w, bufs);
    for (size_t i = 0; i < back.size(); ++i) {
      CHECK(back[i] == bufs[i].get());
      CHECK(back[i]->failed);
      CHECK(back[i]->file_end == 0);
    }
    CHECK(w.had_error());
    CHECK(w.bytes_written() == 0);
    err = cap.text();
  }
  CHECK(err.find("writing /dev/full failed: No space left on device") != std::string::npos);
  // Said once, however many writes failed.
  CHECK(err.find("No space left", err.find("No space left") + 1) == std::string::npos);
}

}  // TEST_SUITE("unit")

TEST_CASE("a flush marker on a pipe or /dev/null completes without an error: fsync does not apply there") {
  for (const char* kind : {"pipe", "/dev/null"}) {
    CAPTURE(kind);
    int fds[2] = {-1, -1};
    std::string path = kind;
    if (path == "pipe") {
      REQUIRE(::pipe(fds) == 0);
      path = "/proc/self/fd/" + std::to_string(fds[1]);
    }
    std::string got;
    std::thread reader([&] {
      if (fds[0] < 0) return;
      char buf[65536];
      ssize_t n;
      while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    });
    DiagnosticsCapture err;
    {
      UringWriter w(path, 8);
      CHECK_FALSE(w.seekable());
      std::vector<std::unique_ptr<Buffer>> bufs;
      bufs.push_back(make_buffer(1000, 'a'));
      const std::vector<Buffer*> back = write_all(w, bufs);
      CHECK_FALSE(back[0]->failed);
      sync(w);  // returns: the marker came back
      CHECK_FALSE(w.had_error());
    }
    if (fds[1] >= 0) ::close(fds[1]);
    reader.join();
    if (fds[0] >= 0) {
      ::close(fds[0]);
      CHECK(got == std::string(1000, 'a'));
    }
    CHECK(err.text().find("failed") == std::string::npos);
  }
}
