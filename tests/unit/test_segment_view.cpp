// SegmentView (include/spanring/segment_view.h): the header validated once, the geometry
// copied, every ring and slot access computed from the copy and index-checked. In-process, on
// a plain heap buffer laid out as a segment: no shared memory is needed to test the view.
#include <doctest/doctest.h>

#include <spanring/segment_view.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

using namespace spanring;

namespace {

// A zero-filled buffer holding a valid header for `rings` rings of `capacity` slots.
struct Buffer {
  uint64_t size;
  std::unique_ptr<std::byte[]> bytes;
  Buffer(uint32_t rings, uint32_t capacity, uint64_t extra = 0)
      : size(segment_bytes(rings, capacity) + extra), bytes(new std::byte[size]()) {
    auto* h = new (bytes.get()) SegmentHeader{};
    h->layout_version = kLayoutVersion;
    h->header_bytes = kSegmentHeaderBytes;
    h->slot_bytes = kSlotBytes;
    h->ring_header_bytes = kRingHeaderBytes;
    h->ring_count = rings;
    h->ring_capacity = capacity;
    h->rings_offset = rings_offset();
    h->journal_offset = journal_offset(rings);
    h->slots_offset = slots_offset(rings);
    h->segment_bytes = segment_bytes(rings, capacity);
    h->strings_offset = strings_offset(rings);
    h->string_entries = kStringTableEntries;
    h->string_entry_bytes = sizeof(StringEntry);
    h->magic.store(kSegmentMagic, std::memory_order_release);
  }
  SegmentHeader& header() { return *reinterpret_cast<SegmentHeader*>(bytes.get()); }
};

std::string refused(std::byte* base, uint64_t size) {
  SegmentView v;
  std::string why;
  if (SegmentView::validate(base, size, v, why)) return "";
  CHECK_FALSE(v.is_valid());
  return why;
}

}  // namespace

TEST_CASE("a valid header gives a view whose rings, slots and journal lie where the layout says") {
  Buffer b(3, 32);
  SegmentView v;
  std::string why;
  REQUIRE(SegmentView::validate(b.bytes.get(), b.size, v, why));
  CHECK(why.empty());
  CHECK(v.is_valid());
  CHECK(v.ring_count() == 3);
  CHECK(v.ring_capacity() == 32);
  CHECK(v.bytes() == segment_bytes(3, 32));
  CHECK(&v.header() == &b.header());
  for (uint32_t i = 0; i < 3; ++i) {
    CHECK(reinterpret_cast<std::byte*>(&v.ring(i)) ==
          b.bytes.get() + rings_offset() + uint64_t{i} * kRingHeaderBytes);
    CHECK(v.ring_slots(i) == b.bytes.get() + slots_offset(3) + uint64_t{i} * 32 * kSlotBytes);
  }
  CHECK(reinterpret_cast<std::byte*>(v.journal()) == b.bytes.get() + journal_offset(3));
  // The last slot of the last ring ends exactly at the end of the layout.
  CHECK(v.ring_slots(2) + 32 * kSlotBytes == b.bytes.get() + v.bytes());
}

TEST_CASE("indices past the ring count are refused, never turned into addresses") {
  Buffer b(2, 16);
  SegmentView v;
  std::string why;
  REQUIRE(SegmentView::validate(b.bytes.get(), b.size, v, why));
  CHECK(v.has_ring(1));
  CHECK_FALSE(v.has_ring(2));
  CHECK_FALSE(v.has_ring(uint64_t{1} << 32));
  CHECK_THROWS_AS(v.ring(2), std::out_of_range);
  CHECK_THROWS_AS(v.ring_slots(2), std::out_of_range);
  CHECK_THROWS_AS(v.ring(UINT32_MAX), std::out_of_range);
}

TEST_CASE("the geometry is copied once: rewriting the header afterwards moves no access and is reported") {
  Buffer b(4, 16);
  SegmentView v;
  std::string why;
  REQUIRE(SegmentView::validate(b.bytes.get(), b.size, v, why));
  CHECK(v.geometry_changed().empty());
  std::byte* const ring3 = reinterpret_cast<std::byte*>(&v.ring(3));
  std::byte* const slots3 = v.ring_slots(3);

  SegmentHeader& h = b.header();
  h.rings_offset = 1ull << 40;
  h.slots_offset = 7;
  h.ring_count = 1u << 30;
  h.ring_capacity = 1u << 30;
  h.segment_bytes = 3;
  CHECK(reinterpret_cast<std::byte*>(&v.ring(3)) == ring3);
  CHECK(v.ring_slots(3) == slots3);
  CHECK(v.ring_count() == 4);
  CHECK(v.ring_capacity() == 16);
  CHECK_THROWS_AS(v.ring(4), std::out_of_range);  // the header's count is not believed

  const std::string changed = v.geometry_changed();
  CHECK(changed.find("rings_offset 1099511627776 (was " + std::to_string(rings_offset()) + ")") !=
        std::string::npos);
  CHECK(changed.find("slots_offset 7") != std::string::npos);
  CHECK(changed.find("ring_count 1073741824 (was 4)") != std::string::npos);
  CHECK(changed.find("ring_capacity 1073741824 (was 16)") != std::string::npos);
  CHECK(changed.find("segment_bytes 3") != std::string::npos);
  CHECK(changed.find("journal_offset") == std::string::npos);  // untouched fields are not named
}

TEST_CASE("headers that do not describe this mapping are refused with the reason") {
  SUBCASE("no magic: not a segment") {
    Buffer b(1, 16);
    b.header().magic.store(0x1234);
    CHECK(refused(b.bytes.get(), b.size).find("not a spanring segment") != std::string::npos);
  }
  SUBCASE("smaller than a header") {
    Buffer b(1, 16);
    CHECK(refused(b.bytes.get(), kSegmentHeaderBytes - 1).find("smaller than a spanring header") !=
          std::string::npos);
    CHECK_FALSE(refused(nullptr, 0).empty());
  }
  SUBCASE("another layout version") {
    Buffer b(1, 16);
    b.header().layout_version = kLayoutVersion + 1;
    CHECK(refused(b.bytes.get(), b.size).find("layout version") != std::string::npos);
  }
  SUBCASE("another slot size") {
    Buffer b(1, 16);
    b.header().slot_bytes = 128;
    CHECK(refused(b.bytes.get(), b.size).find("slot 128/64") != std::string::npos);
  }
  SUBCASE("ring counts and capacities out of range or not a power of two") {
    for (const auto& [rings, cap] : {std::pair<uint32_t, uint32_t>{0, 16}, {kMaxRingCount + 1, 16},
                                     {1, 24}, {1, 8}, {1, kMaxRingCapacity * 2}}) {
      Buffer b(1, 16);
      b.header().ring_count = rings;
      b.header().ring_capacity = cap;
      CAPTURE(rings);
      CAPTURE(cap);
      CHECK(refused(b.bytes.get(), b.size).find("invalid ring table") != std::string::npos);
    }
  }
  SUBCASE("an offset that is not the layout's") {
    Buffer b(2, 16);
    b.header().slots_offset += 64;
    CHECK(refused(b.bytes.get(), b.size).find("size mismatch") != std::string::npos);
  }
  SUBCASE("a header promising more rings than the mapping holds") {
    Buffer b(2, 16);
    // Consistent with itself, but the object is the size of a 2-ring segment.
    SegmentHeader& h = b.header();
    h.ring_count = 64;
    h.journal_offset = journal_offset(64);
    h.strings_offset = strings_offset(64);
    h.slots_offset = slots_offset(64);
    h.segment_bytes = segment_bytes(64, 16);
    CHECK(refused(b.bytes.get(), b.size).find("size mismatch") != std::string::npos);
  }
}
