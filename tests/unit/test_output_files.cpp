// OutputFiles as the drainer's Destination (drain/output_files.h, drain/destination.h), in
// process with a recording DestinationEvents: buffers are sized to the room left in a
// --max-size file, then carry nothing (capacity 0) while take_closing() still has the room kept
// back for the last line; each buffer is reported durable once, in order, with the file's end;
// a --rotate file starts the next one only after every buffer of the current one was reported
// durable, and says so with the new file's identity.
#include "drain/output_files.h"

#include "drain/diagnostics.h"
#include "mp_util.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace spanring;

namespace {

using spanring_test::read_file;

struct TempDir {
  std::string path;
  TempDir() {
    char p[] = "/tmp/spanring-outfiles-XXXXXX";
    REQUIRE(::mkdtemp(p) != nullptr);
    path = p;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

// Every event, in order, as text: "durable END", "durable failed END", "new_file INO".
struct Recorder final : DestinationEvents {
  std::vector<std::string> log;
  uint64_t new_ino = 0;
  void durable(bool failed, uint64_t end) override {
    log.push_back(std::string("durable ") + (failed ? "failed " : "") + std::to_string(end));
  }
  void new_file(uint64_t, uint64_t ino) override {
    new_ino = ino;
    log.push_back("new_file");
  }
  void forget_process(uint32_t pid) override { log.push_back("forget " + std::to_string(pid)); }
};

// Fills `b` to `n` bytes of `c` and submits it.
void fill_submit(OutputFiles& out, Buffer* b, size_t n, char c) {
  REQUIRE(n <= b->capacity);
  std::memset(b->data.get(), c, n);
  b->len = n;
  out.submit(b, Commit{});
}

// Messages of the diagnostics channel while it lives (drain/diagnostics.h).
class Capture final : public DiagnosticSink {
 public:
  Capture() : scope_(*this) {}
  void write(std::string_view line) noexcept override { text.append(line); }
  std::string text;

 private:
  DiagnosticsScope scope_;
};

uint64_t inode(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_ino;
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("--max-size: buffers shrink to the room left, then carry nothing; the closing room stays") {
  TempDir dir;
  const std::string path = dir.path + "/out";
  OutputLimits limits;
  limits.max_size = 64u << 10;
  OutputFiles out(path, 0, UringWriter::Fallback::kSynchronous, limits);
  Recorder ev;
  constexpr size_t kEvent = 100;  // the sink's largest event
  out.attach(ev, kEvent);
  CHECK(out.kept_bytes() == 0);
  CHECK(out.dev() != 0);
  CHECK(out.ino() == inode(path));
  // Room kept back for the closing line: 64 + kEvent; a buffer needs 64 + 8 x kEvent.
  const uint64_t usable = limits.max_size - (64 + kEvent);
  Buffer* b = out.take();
  CHECK(b->capacity == usable);
  fill_submit(out, b, usable - 1000, 'a');
  b = out.take();
  CHECK(b->capacity == 1000);
  fill_submit(out, b, 1000, 'b');
  std::string said;
  {
    Capture cap;
    b = out.take();  // less room than a buffer needs: full from now on
    said = cap.text;
  }
  CHECK(b->capacity == 0);
  CHECK(said.find("reached --max-size (65536 bytes) at byte " + std::to_string(usable)) !=
        std::string::npos);
  fill_submit(out, b, 0, 'c');  // a carrier: its Commit, no bytes
  CHECK(out.take()->capacity == 0);  // and so on, every later one
  Buffer* closing = out.take_closing();
  CHECK(closing->capacity == 64 + kEvent);
  out.give_back(closing);
  CHECK(out.finish());
  CHECK(out.in_flight() == 0);
  CHECK_FALSE(out.collect(0));  // nothing on its way
  // One report per submitted buffer, in order; the carrier moves nothing in the file.
  const std::vector<std::string> want = {"durable " + std::to_string(usable - 1000),
                                         "durable " + std::to_string(usable),
                                         "durable " + std::to_string(usable)};
  CHECK(ev.log == want);
  CHECK(read_file(path) == std::string(usable - 1000, 'a') + std::string(1000, 'b'));
}

TEST_CASE("--rotate: the next file starts once every buffer of the current one is durable") {
  TempDir dir;
  const std::string path = dir.path + "/out";
  const OutputLimits limits = rotate_limits(64u << 10, "2");
  OutputFiles out(path, 0, UringWriter::Fallback::kSynchronous, limits);
  Recorder ev;
  out.attach(ev, 100);
  const uint64_t first_ino = out.ino();
  Buffer* b = out.take();
  CHECK(b->capacity == limits.rotate_size);  // no closing line kept back when rotating
  fill_submit(out, b, 40000, 'a');
  b = out.take();
  fill_submit(out, b, b->capacity, 'b');  // the file is full now
  CHECK(ev.log.size() <= 2);
  b = out.take();  // rotates: both buffers of the first file come back first
  REQUIRE(ev.log.size() == 3);
  CHECK(ev.log[0] == "durable 40000");
  CHECK(ev.log[1] == "durable 65536");
  CHECK(ev.log[2] == "new_file");
  CHECK(out.rotations() == 1);
  CHECK(ev.new_ino == inode(path));
  CHECK(ev.new_ino != first_ino);
  CHECK(out.ino() == ev.new_ino);
  CHECK(b->capacity == limits.rotate_size);
  fill_submit(out, b, 10, 'c');
  CHECK(out.finish());
  CHECK(ev.log.back() == "durable 10");  // the new file's own offsets
  CHECK(read_file(OutputFiles::rotated_path(path, 1)) ==
        std::string(40000, 'a') + std::string(65536 - 40000, 'b'));
  CHECK(read_file(path) == std::string(10, 'c'));
}

}  // TEST_SUITE("unit")
