// Segment creation, opening and refusal of segments that are not ours.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <spanring/segment.h>

#include "src/proc.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

using namespace spanring;

namespace {

std::string unique_name(const char* what) {
  static int n = 0;
  return "spanring-test-seg-" + std::to_string(::getpid()) + "-" + what + "-" +
         std::to_string(n++);
}

struct Removed {
  std::string name;
  ~Removed() { Segment::remove(name); }
};

}  // namespace

TEST_CASE("a created segment is mode 0600 whatever the umask, and opens with the same geometry") {
  Removed r{unique_name("mode")};
  const mode_t old = ::umask(0);
  Segment created = Segment::create(r.name, SegmentOptions{8, 100});
  ::umask(old);
  struct stat st {};
  REQUIRE(::stat(("/dev/shm/" + r.name).c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(created.ring_capacity() == 128);  // rounded up to a power of two
  Segment opened = Segment::open(r.name);
  CHECK(opened.ring_count() == 8);
  CHECK(opened.ring_capacity() == 128);
  CHECK(opened.size() == segment_bytes(8, 128));
}

TEST_CASE("creating over an existing name is refused and leaves the segment untouched") {
  Removed r{unique_name("exists")};
  Segment a = Segment::create(r.name, SegmentOptions{4, 16});
  a.ring(0).head.store(77);
  try {
    Segment::create(r.name, SegmentOptions{8, 32});
    FAIL("create over an existing segment succeeded");
  } catch (const Error& e) {
    CHECK(e.err() == EEXIST);
    CHECK(std::string(e.what()).find(r.name) != std::string::npos);
  }
  Segment b = Segment::open(r.name);
  CHECK(b.ring_count() == 4);
  CHECK(b.ring(0).head.load() == 77);
}

TEST_CASE("a segment of another layout version is refused with both versions named") {
  Removed r{unique_name("version")};
  Segment a = Segment::create(r.name, SegmentOptions{4, 16});
  a.header().layout_version = kLayoutVersion + 6;
  try {
    Segment::open(r.name);
    FAIL("a segment of another version was opened");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(e.err() == EPROTO);
    CHECK(what.find("version " + std::to_string(kLayoutVersion + 6)) != std::string::npos);
    CHECK(what.find("version " + std::to_string(kLayoutVersion) + " only") != std::string::npos);
  }
}

TEST_CASE("a segment with another record size or a size smaller than its header says is refused") {
  Removed r{unique_name("size")};
  {
    Segment a = Segment::create(r.name, SegmentOptions{4, 16});
    a.header().slot_bytes = 128;
    CHECK_THROWS_WITH_AS(Segment::open(r.name), doctest::Contains("slot 128/64"), Error);
    a.header().slot_bytes = kSlotBytes;
    a.header().ring_count = 4000;  // the object is far smaller than 4000 rings need
    CHECK_THROWS_WITH_AS(Segment::open(r.name), doctest::Contains("size mismatch"), Error);
  }
  // A name that is not a spanring segment at all.
  Removed other{unique_name("foreign")};
  const int fd = ::shm_open(other.name.c_str(), O_CREAT | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096) == 0);
  ::close(fd);
  CHECK_THROWS_WITH_AS(Segment::open(other.name), doctest::Contains("not a spanring segment"),
                       Error);
}

TEST_CASE("opening a name that does not exist says so") {
  try {
    Segment::open(unique_name("missing"));
    FAIL("opened a missing segment");
  } catch (const Error& e) {
    CHECK(e.err() == ENOENT);
  }
}

TEST_CASE("out-of-range sizes are refused before anything is created") {
  const std::string name = unique_name("range");
  CHECK_THROWS_AS(Segment::create(name, SegmentOptions{0, 16}), Error);
  CHECK_THROWS_AS(Segment::create(name, SegmentOptions{4, 8}), Error);
  CHECK_THROWS_AS(Segment::create(name, SegmentOptions{kMaxRingCount + 1, 16}), Error);
  struct stat st {};
  CHECK(::stat(("/dev/shm/" + name).c_str(), &st) != 0);
}

TEST_CASE("a segment whose one ring is larger than /dev/shm's free space is refused before anything is created") {
  // Rings are committed when claimed, so creation asks for the tables and one ring; with the
  // largest ring (1 GiB) and 2^16 rings that is still less than many a /dev/shm holds. A ring
  // larger than the free space is only possible here when the free space is under 1 GiB:
  // mp_fault_small_shm checks the refusal on an 8 MiB /dev/shm in any case.
  struct statvfs fs {};
  REQUIRE(::statvfs("/dev/shm", &fs) == 0);
  if (uint64_t{fs.f_bavail} * fs.f_frsize >= uint64_t{kMaxRingCapacity} * kSlotBytes) {
    MESSAGE("/dev/shm has 1 GiB or more free: the refusal is checked by mp_fault_small_shm");
    return;
  }
  const std::string name = unique_name("nospace");
  try {
    Segment::create(name, SegmentOptions{kMaxRingCount, kMaxRingCapacity});
    Segment::remove(name);
    FAIL("created a segment whose one ring cannot fit in /dev/shm");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNoSpace);
    CHECK(e.err() == ENOSPC);
    CHECK(std::string(e.what()).find("MiB free") != std::string::npos);
  }
  struct stat st {};
  CHECK(::stat(("/dev/shm/" + name).c_str(), &st) != 0);
}

TEST_CASE("process start time tells a live pid from a missing one") {
  CHECK(process_start_time(static_cast<uint32_t>(::getpid())) != 0);
  CHECK(process_start_time(0x7ffffff0u) == 0);
}
