// The memory a segment takes: its tables at creation, a ring's slots only once a thread claims
// the ring (segment.h), and `spanring stat`'s report of both (drain/segment_stat.h).
#include "drain/segment_stat.h"

#include <spanring/segment.h>
#include <spanring/span.h>
#include <spanring/spanring.h>

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

using namespace spanring;

namespace {

// The bytes /dev/shm holds for segment `name` (its block count).
uint64_t shm_bytes(const std::string& name) {
  struct stat st {};
  REQUIRE(::stat(("/dev/shm/" + name).c_str(), &st) == 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

}  // namespace

TEST_CASE("a segment commits its tables at creation and a ring's slots at the ring's first claim") {
  const std::string name = "spanring-test-mem-" + std::to_string(::getpid());
  // 4 rings of 4 MiB: the mapped size is 16 MiB more than the tables.
  constexpr uint32_t kRings = 4;
  constexpr uint32_t kCapacity = 65536;
  constexpr uint64_t kRingBytes = uint64_t{kCapacity} * kSlotBytes;
  Segment seg = Segment::create(name, SegmentOptions{kRings, kCapacity});
  struct Removed {
    std::string name;
    ~Removed() { Segment::remove(name); }
  } removed{name};
  const uint64_t tables = slots_offset(kRings);
  CHECK(seg.size() == tables + kRings * kRingBytes);

  SegmentStat s = read_segment_stat(seg.view(), name, seg.size());
  CHECK(s.table_bytes == tables);
  CHECK(s.ring_slot_bytes == kRingBytes);
  CHECK(s.rings_committed == 0);
  // Nothing of any ring yet (a kernel before 5.14 reserves everything: then this is moot).
  const uint64_t before = shm_bytes(name);
  CHECK(s.shm_bytes == before);
  if (before >= seg.size()) {
    MESSAGE("this kernel has no MADV_POPULATE_WRITE: every page was reserved at creation");
    return;
  }
  CHECK(before < tables + kRingBytes);

  // One thread traces: its ring's slots are committed, the three others' are not.
  REQUIRE(attach(name.c_str()));
  std::thread([] { CHECK(emit("mem.one", 1, 1)); }).join();
  s = read_segment_stat(seg.view(), name, seg.size());
  CHECK(s.rings_committed == 1);
  // qemu-user (.ci/run's aarch64 step sets SPANRING_TEST_EXEC_WRAPPER) answers madvise with
  // success and commits nothing, so there the pages come with the first stores instead.
  const char* wrapper = std::getenv("SPANRING_TEST_EXEC_WRAPPER");
  if (wrapper != nullptr && *wrapper != '\0') {
    MESSAGE("under ", wrapper, " madvise commits nothing: the committed bytes are not checked");
  } else {
    CHECK(s.shm_bytes >= tables + kRingBytes);
    CHECK(s.shm_bytes < tables + 2 * kRingBytes);
  }
  const std::string text = format_stat_text(s);
  CHECK_MESSAGE(text.find("memory: ") != std::string::npos, text);
  CHECK_MESSAGE(text.find("4.0 MiB per ring a thread claimed") != std::string::npos, text);
  CHECK_MESSAGE(text.find("1 rings committed") != std::string::npos, text);
  CHECK(format_stat_json(s).find("\"rings_committed\": 1") != std::string::npos);

  // A claim takes the lowest free ring, so that threads started one after another reuse the
  // rings earlier threads committed: the first thread took ring 0; a second one (ring 0 stays
  // its owner's until a drainer frees it) takes ring 1, and the other two stay uncommitted.
  CHECK(seg.ring(0).state.load(std::memory_order_acquire) != kRingFree);
  std::thread([] { CHECK(emit("mem.two", 1, 1)); }).join();
  CHECK(seg.ring(1).state.load(std::memory_order_acquire) != kRingFree);
  CHECK(seg.ring(2).state.load(std::memory_order_acquire) == kRingFree);
  CHECK(seg.ring(3).state.load(std::memory_order_acquire) == kRingFree);
  s = read_segment_stat(seg.view(), name, seg.size());
  CHECK(s.rings_committed == 2);
}
