// UringWriter (drain/uring_writer.h), in process: buffers land in a temp file at their offsets
// in submit order and come back in that order; a kept prefix is cut to and appended after;
// output into a pipe arrives whole and in order; a write cut short by the file size limit is
// finished where it can be and then reported, the file cut back to its last whole buffer;
// /dev/full reports ENOSPC once (through the diagnostics channel) and hands every buffer back as failed.
// Direct::kTry (O_DIRECT where the filesystem takes it): the same bytes at the same offsets for
// buffers of any length and any kept prefix, the file exactly as long as what came back after
// every buffer, the same cut-back at the file size limit, and the same bytes on tmpfs. A buffer
// handed over while a write is in flight is taken then (the writer's eventfd wake-up).
#include "drain/uring_writer.h"

#include "drain/diagnostics.h"
#include "mp_util.h"

#include <spanring/error.h>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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

// The buffers `back` (as write_all returned them) came back in the order `bufs` were
// submitted, none failed, and each one's file_end is the sum of the lengths up to it: the
// file holds every buffer up to that one.
void check_written_in_order(const std::vector<Buffer*>& back,
                            const std::vector<std::unique_ptr<Buffer>>& bufs) {
  REQUIRE(back.size() == bufs.size());
  uint64_t end = 0;
  for (size_t i = 0; i < back.size(); ++i) {
    CAPTURE(i);
    CHECK(back[i] == bufs[i].get());
    CHECK_FALSE(back[i]->failed);
    end += back[i]->len;
    CHECK(back[i]->file_end == end);
  }
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

// RLIMIT_FSIZE for one test: the kernel writes up to the limit (a short write) and refuses the
// rest with EFBIG. SIGXFSZ is ignored meanwhile so that the process lives to see it; both are
// restored when this goes.
class FileSizeLimit {
 public:
  FileSizeLimit() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    REQUIRE(::sigaction(SIGXFSZ, &ign, &old_) == 0);
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
  }
  ~FileSizeLimit() {
    restore();
    ::sigaction(SIGXFSZ, &old_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  void set(rlim_t bytes) {
    rlimit lim = saved_;
    lim.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  void restore() { ::setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  struct sigaction old_ {};
  rlimit saved_{};
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
  check_written_in_order(write_all(w, bufs), bufs);
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
  FileSizeLimit limit;
  TempPath file;
  std::string err;
  std::vector<Buffer*> back;
  std::vector<std::unique_ptr<Buffer>> bufs;
  {
    DiagnosticsCapture cap;
    {
      UringWriter w(file.path, 1);  // one write in flight: the limit falls inside buffer 1
      limit.set(150000);
      bufs.push_back(make_buffer(100000, 'a'));
      bufs.push_back(make_buffer(100000, 'b'));  // 50,000 bytes fit, then EFBIG
      bufs.push_back(make_buffer(100000, 'c'));  // aimed past the hole: failed too
      back = write_all(w, bufs);
      CHECK(w.had_error());
      CHECK(w.bytes_written() == 100000);
    }
    limit.restore();
    err = cap.text();
  }
  REQUIRE(back.size() == 3);
  CHECK_FALSE(back[0]->failed);
  CHECK(back[1]->failed);
  CHECK(back[2]->failed);
  CHECK(back[1]->file_end == 100000);
  CHECK(read_file(file.path) == std::string(100000, 'a'));  // cut back: no half buffer
  CHECK(err.find("File too large") != std::string::npos);
}

TEST_CASE("after a failed write, buffers of its epoch or an older one come back failed unwritten, later epochs are written") {
  FileSizeLimit limit;
  TempPath file;
  DiagnosticsCapture cap;
  std::vector<std::unique_ptr<Buffer>> bufs;
  bufs.push_back(make_buffer(100000, 'a'));  // epoch 1: fails (the limit)
  bufs.push_back(make_buffer(1000, 'b'));    // epoch 1, formatted before the failure was known
  bufs.push_back(make_buffer(1000, 'u'));    // not stamped: never refused
  bufs.push_back(make_buffer(1000, 'c'));    // epoch 2: formatted after it
  bufs[0]->epoch = 1;
  bufs[1]->epoch = 1;
  bufs[3]->epoch = 2;
  // kSynchronous: io_uring here, pwrite(2) where it is blocked (the fault suite runs this case
  // under no_uring_exec too: mp_fault_no_uring_epoch).
  UringWriter w(file.path, 1, 0, UringWriter::Fallback::kSynchronous);
  MESSAGE(std::string(w.synchronous() ? "the pwrite(2) writer" : "the io_uring writer"));
  if (std::getenv("SPANRING_TEST_EXPECT_PWRITE") != nullptr) REQUIRE(w.synchronous());
  limit.set(50000);
  w.submit(bufs[0].get());
  Buffer* first = nullptr;
  while (first == nullptr) first = w.take_done(1000000);
  CHECK(first == bufs[0].get());
  CHECK(first->failed);
  limit.restore();  // room again: what is still written now must not depend on buffer 0
  const std::vector<std::unique_ptr<Buffer>> rest(std::make_move_iterator(bufs.begin() + 1),
                                                  std::make_move_iterator(bufs.end()));
  const std::vector<Buffer*> back = write_all(w, rest);
  REQUIRE(back.size() == 3);
  CHECK(back[0]->failed);  // refused: its epoch's write failed
  CHECK_FALSE(back[1]->failed);
  CHECK_FALSE(back[2]->failed);
  CHECK(back[0]->file_end == 0);
  CHECK(back[2]->file_end == 2000);
  sync(w);
  CHECK(read_file(file.path) == std::string(1000, 'u') + std::string(1000, 'c'));
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

TEST_CASE("direct writes: any lengths and offsets land byte-exact, the file ends at its last byte") {
  TempPath file;
  UringWriter w(file.path, 4, 0, UringWriter::Fallback::kRequired, UringWriter::Direct::kTry);
  // /tmp on tmpfs refuses O_DIRECT: the page-cache path then, with the same promises.
  if (!w.direct()) MESSAGE("O_DIRECT refused on /tmp: checking the page-cache path instead");
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::string want;
  uint32_t x = 12345;
  // Lengths around and across 4 KiB blocks: inside one block, exactly one, odd sizes, large.
  const size_t lengths[] = {1, 4095, 1, 4096, 100, 8192, 5000, 3, 4093, 65537, 1 << 20, 7, 0, 4096,
                            12289, 2};
  for (size_t n : lengths) {
    auto b = make_buffer(n == 0 ? 16 : n, 'x');
    b->len = n;
    for (size_t i = 0; i < n; ++i) {
      x = x * 1103515245u + 12345u;
      b->data[i] = static_cast<char>('a' + (x >> 16) % 26);
    }
    want.append(b->data.get(), n);
    bufs.push_back(std::move(b));
  }
  uint64_t end = 0;
  for (const auto& b : bufs) {  // one at a time: the file's size after each one
    w.submit(b.get());
    Buffer* back = nullptr;
    while ((back = w.take_done(1000000)) == nullptr) {
    }
    CHECK(back == b.get());
    CHECK_FALSE(back->failed);
    end += back->len;
    CHECK(back->file_end == end);
    CHECK(read_file(file.path) == want.substr(0, end));  // no padding, no hole
  }
  // And all in flight together, after them.
  const std::vector<Buffer*> back = write_all(w, bufs);
  for (size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i] == bufs[i].get());
    CHECK_FALSE(back[i]->failed);
  }
  sync(w);
  CHECK_FALSE(w.had_error());
  CHECK(read_file(file.path) == want + want);
}

TEST_CASE("direct writes: a reader of the live file sees only written bytes, never a hole") {
  TempPath file;
  std::atomic<bool> done{false};
  std::atomic<size_t> holes{0}, reads{0};
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      const std::string now = read_file(file.path);
      if (now.find('\0') != std::string::npos) holes.fetch_add(1, std::memory_order_relaxed);
      reads.fetch_add(1, std::memory_order_relaxed);
    }
  });
  {
    UringWriter w(file.path, 8, 0, UringWriter::Fallback::kRequired, UringWriter::Direct::kTry);
    std::vector<std::unique_ptr<Buffer>> bufs;
    for (int i = 0; i < 200; ++i)
      bufs.push_back(make_buffer(1000 + static_cast<size_t>(i) * 997 % 70000,
                                 static_cast<char>('a' + i % 26)));
    write_all(w, bufs);
    sync(w);
  }
  done.store(true, std::memory_order_release);
  reader.join();
  CHECK(reads.load() > 0);
  CHECK(holes.load() == 0);  // the file grows only over bytes that are in it
}

TEST_CASE("direct writes after a kept prefix that ends inside a block") {
  for (const uint64_t keep : {uint64_t{0}, uint64_t{4096}, uint64_t{4100}, uint64_t{10000}}) {
    CAPTURE(keep);
    TempPath file(std::string(keep, 'k') + std::string(700, 'u'));  // 700 uncommitted bytes
    UringWriter w(file.path, 8, keep, UringWriter::Fallback::kRequired,
                  UringWriter::Direct::kTry);
    std::vector<std::unique_ptr<Buffer>> bufs;
    bufs.push_back(make_buffer(5000, 'n'));
    bufs.push_back(make_buffer(10, 'm'));
    bufs.push_back(make_buffer(9000, 'o'));
    const std::vector<Buffer*> back = write_all(w, bufs);
    CHECK(back[2]->file_end == keep + 14010);
    sync(w);
    CHECK(read_file(file.path) == std::string(keep, 'k') + std::string(5000, 'n') +
                                      std::string(10, 'm') + std::string(9000, 'o'));
  }
}

TEST_CASE("direct writes cut short by the file size limit: the rest fails, the file ends whole") {
  FileSizeLimit limit;
  TempPath file;
  std::string err;
  std::vector<Buffer*> back;
  std::vector<std::unique_ptr<Buffer>> bufs;
  {
    DiagnosticsCapture cap;
    {
      UringWriter w(file.path, 1, 0, UringWriter::Fallback::kRequired,
                    UringWriter::Direct::kTry);
      limit.set(150000);
      bufs.push_back(make_buffer(100000, 'a'));
      bufs.push_back(make_buffer(100000, 'b'));  // crosses the limit
      bufs.push_back(make_buffer(100000, 'c'));  // after the cut-back, still over the limit
      bufs.push_back(make_buffer(10, 'd'));      // fits after the cut-back: written
      back = write_all(w, bufs);
      CHECK(w.had_error());
      CHECK(w.bytes_written() == 100010);
      limit.restore();
      // Writing goes on after the failure, from the cut-back end.
      std::vector<std::unique_ptr<Buffer>> more;
      more.push_back(make_buffer(5000, 'e'));
      const std::vector<Buffer*> again = write_all(w, more);
      CHECK_FALSE(again[0]->failed);
      CHECK(again[0]->file_end == 105010);
      sync(w);
    }
    err = cap.text();
  }
  REQUIRE(back.size() == 4);
  CHECK_FALSE(back[0]->failed);
  CHECK(back[1]->failed);
  CHECK(back[2]->failed);
  CHECK_FALSE(back[3]->failed);
  CHECK(back[1]->file_end == 100000);
  CHECK(back[3]->file_end == 100010);
  CHECK(read_file(file.path) ==
        std::string(100000, 'a') + std::string(10, 'd') + std::string(5000, 'e'));
  CHECK(err.find("File too large") != std::string::npos);
}

TEST_CASE("direct writes, several in flight: a short write in the middle fails its buffer and the ones queued behind it") {
  // All buffers queued at once, so that they go in one linked chain; the limit falls inside the
  // second buffer's blocks, at a block boundary (the direct write comes back short and whole
  // blocks, then EFBIG) and inside a block (the write is no longer aligned).
  for (const rlim_t at : {rlim_t{36 * 4096}, rlim_t{150000}}) {
    CAPTURE(at);
    FileSizeLimit limit;
    TempPath file;
    std::vector<Buffer*> back;
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::string err;
    {
      DiagnosticsCapture cap;
      {
        UringWriter w(file.path, 8, 0, UringWriter::Fallback::kRequired,
                      UringWriter::Direct::kTry);
        if (!w.direct()) MESSAGE("O_DIRECT refused on /tmp: checking the page-cache path instead");
        limit.set(at);
        bufs.push_back(make_buffer(100001, 'a'));
        bufs.push_back(make_buffer(100002, 'b'));  // crosses the limit
        bufs.push_back(make_buffer(30003, 'c'));   // queued behind it: aimed past the cut
        bufs.push_back(make_buffer(9, 'd'));
        back = write_all(w, bufs);
        CHECK(w.had_error());
        CHECK(w.bytes_written() == 100001);
        limit.restore();
        // Writing goes on after the failure, several in flight again, from the cut-back end.
        std::vector<std::unique_ptr<Buffer>> more;
        for (int i = 0; i < 6; ++i) more.push_back(make_buffer(70001, static_cast<char>('e' + i)));
        const std::vector<Buffer*> again = write_all(w, more);
        for (size_t i = 0; i < again.size(); ++i) {
          CHECK(again[i] == more[i].get());
          CHECK_FALSE(again[i]->failed);
          CHECK(again[i]->file_end == 100001 + 70001 * (i + 1));
        }
        sync(w);
      }
      err = cap.text();
    }
    REQUIRE(back.size() == 4);
    CHECK(back[0] == bufs[0].get());
    CHECK_FALSE(back[0]->failed);
    for (size_t i = 1; i < 4; ++i) {
      CHECK(back[i] == bufs[i].get());
      CHECK(back[i]->failed);
      CHECK(back[i]->file_end == 100001);
    }
    std::string want(100001, 'a');
    for (int i = 0; i < 6; ++i) want.append(70001, static_cast<char>('e' + i));
    CHECK(read_file(file.path) == want);
    CHECK(err.find("File too large") != std::string::npos);
  }
}

TEST_CASE("direct writes, several in flight: megabyte buffers come back in order, a live reader never sees a NUL") {
  // Buffers of about the drainer's size (1 MiB, ending anywhere in a block), queued 8 deep and
  // many more behind: several direct writes are in flight at once. Direct writes that extend a
  // file complete out of order when they are not linked, and the file's size then runs ahead of
  // bytes not yet written: the reader would see zeros.
  TempPath file;
  std::atomic<bool> done{false};
  std::atomic<size_t> holes{0}, reads{0};
  std::thread reader([&] {
    // The file's last 4 MiB as it is now (the writes in flight land there), over and over.
    const int fd = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    std::vector<char> buf(4u << 20);
    while (fd >= 0 && !done.load(std::memory_order_acquire)) {
      struct stat st {};
      if (::fstat(fd, &st) != 0) break;
      const off_t from = std::max<off_t>(0, st.st_size - static_cast<off_t>(buf.size()));
      const ssize_t n = ::pread(fd, buf.data(), static_cast<size_t>(st.st_size - from), from);
      if (n > 0 && std::find(buf.data(), buf.data() + n, '\0') != buf.data() + n)
        holes.fetch_add(1, std::memory_order_relaxed);
      reads.fetch_add(1, std::memory_order_relaxed);
    }
    if (fd >= 0) ::close(fd);
  });
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::string want;
  for (int i = 0; i < 48; ++i) {
    bufs.push_back(make_buffer((1u << 20) - 4096 + static_cast<size_t>(i) * 613 % 8192,
                               static_cast<char>('A' + i % 26)));
    want.append(bufs.back()->data.get(), bufs.back()->len);
  }
  {
    UringWriter w(file.path, 8, 0, UringWriter::Fallback::kRequired, UringWriter::Direct::kTry);
    check_written_in_order(write_all(w, bufs), bufs);
    sync(w);
    CHECK_FALSE(w.had_error());
  }
  done.store(true, std::memory_order_release);
  reader.join();
  CHECK(reads.load() > 0);
  CHECK(holes.load() == 0);
  CHECK(read_file(file.path) == want);
}

TEST_CASE("a buffer handed over while a write is in flight is taken then, not once that write is back") {
  // The writer sleeps on an eventfd while writes are in flight, and submit() wakes it: the next
  // buffer is taken (and staged, for a direct write) while the disk still writes the one before
  // it, so its write can follow at once. Each trial hands over a 64 MiB buffer and waits until
  // the writer sleeps with its write in flight (sleeps_on_writes) or until it is back, then
  // hands over a small one: a writer that takes buffers only between its waits for the disk
  // never sleeps that way and takes the small one after the big one is back, every trial. A
  // trial misses only when the big write completes between the look and the hand-off, so up to
  // 10; the bytes and the order are checked in every one.
  for (const auto direct : {UringWriter::Direct::kOff, UringWriter::Direct::kTry}) {
    CAPTURE(static_cast<int>(direct));
    TempPath file;
    std::string want;
    UringWriter w(file.path, 8, 0, UringWriter::Fallback::kRequired, direct);
    CHECK(w.wakes_on_submit());
    int trials = 0;
    while (trials < 10 && w.taken_while_writing() == 0) {
      ++trials;
      std::vector<std::unique_ptr<Buffer>> bufs;
      // Whole blocks at block offsets: a direct buffer is one write (no head or tail piece
      // whose completion would wake the writer before the big write is back).
      bufs.push_back(make_buffer((64u << 20) + static_cast<size_t>(trials) * 4096,
                                 static_cast<char>('a' + trials)));
      bufs.push_back(make_buffer(4096 * static_cast<size_t>(1 + trials % 3),
                                 static_cast<char>('A' + trials)));
      for (const auto& b : bufs) want.append(b->data.get(), b->len);
      std::vector<Buffer*> back;
      w.submit(bufs[0].get());
      while (!w.sleeps_on_writes() && back.empty())
        if (Buffer* b = w.take_done(100)) back.push_back(b);
      w.submit(bufs[1].get());
      while (back.size() < 2)
        if (Buffer* b = w.take_done(1000000)) back.push_back(b);
      REQUIRE(back[0] == bufs[0].get());
      REQUIRE(back[1] == bufs[1].get());
      CHECK_FALSE(back[0]->failed);
      CHECK_FALSE(back[1]->failed);
      CHECK(back[1]->file_end == want.size());
    }
    CAPTURE(trials);
    CHECK(w.taken_while_writing() > 0);
    sync(w);
    CHECK(read_file(file.path) == want);
  }
}

TEST_CASE("direct writes on tmpfs (O_DIRECT refused before Linux 6.6, page-cache writes after): same bytes") {
  char dir[] = "/dev/shm/spanring-uring-XXXXXX";
  if (::mkdtemp(dir) == nullptr) {
    MESSAGE("no /dev/shm here: skipped");
    return;
  }
  const std::string path = std::string(dir) + "/out";
  {
    UringWriter w(path, 4, 0, UringWriter::Fallback::kRequired, UringWriter::Direct::kTry);
    std::vector<std::unique_ptr<Buffer>> bufs;
    bufs.push_back(make_buffer(5000, 'p'));
    bufs.push_back(make_buffer(3, 'q'));
    write_all(w, bufs);
    sync(w);
    CHECK(read_file(path) == std::string(5000, 'p') + std::string(3, 'q'));
  }
  ::unlink(path.c_str());
  ::rmdir(dir);
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
