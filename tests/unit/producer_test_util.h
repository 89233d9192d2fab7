// Ring slots read straight from a test's own segment (no drainer), for the producer tests
// (test_compact_producer, test_site_producer): a segment attached for one test, records made on
// a fresh thread (a fresh ring), each record's first slot and payload, string ids checked as
// the drainer checks them. Test code only: REQUIRE/CHECK from doctest.
#pragma once

#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>  // program_invocation_short_name (glibc)
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace producer_test {

using namespace spanring;

// A segment name no other test process uses: the test program's name, its pid, `what`, a count.
inline std::string unique_name(const char* what) {
  static int n = 0;
  return std::string("spanring-test-") + program_invocation_short_name + "-" +
         std::to_string(::getpid()) + "-" + what + "-" + std::to_string(n++);
}

// One record as the slots hold it: the first slot's bytes.
struct Slot {
  uint16_t flags() const { return get<uint16_t>(offsetof(RecordHeader, flags)); }
  uint16_t slots() const { return get<uint16_t>(offsetof(RecordHeader, slots)); }
  CompactRecord compact() const {
    CompactRecord c;
    std::memcpy(&c, bytes, sizeof c);
    return c;
  }
  RecordHeader header() const {
    RecordHeader h;
    std::memcpy(&h, bytes, sizeof h);
    return h;
  }
  template <class T>
  T get(size_t at) const {
    T v;
    std::memcpy(&v, bytes + at, sizeof v);
    return v;
  }
  unsigned char bytes[kSlotBytes];
  std::string payload;  // an ordinary record's name and attribute bytes, from all its slots
};

// A segment for one test, attached to; every record is made on a fresh thread (a fresh ring).
struct TestSegment {
  std::string name;
  Segment seg;
  explicit TestSegment(const char* what, uint32_t capacity = 256)
      : name(unique_name(what)), seg(Segment::create(name, SegmentOptions{4, capacity})) {
    REQUIRE(attach(name.c_str()));
  }
  ~TestSegment() { Segment::remove(name); }

  // Runs f on a new thread and returns the first slot of each record its ring received.
  template <class F>
  std::vector<Slot> records_of(F&& f) {
    uint32_t ring = ~0u;
    std::thread([&] {
      f();
      const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
      for (uint32_t i = 0; i < seg.ring_count(); ++i)
        if (seg.ring(i).owner_tid == tid &&
            seg.ring(i).state.load(std::memory_order_acquire) == kRingActive)
          ring = i;
    }).join();
    REQUIRE(ring != ~0u);
    return slots_of(ring);
  }
  std::vector<Slot> slots_of(uint32_t ring) {
    std::vector<Slot> out;
    const uint64_t head = seg.ring(ring).head.load(std::memory_order_acquire);
    const uint64_t cap = seg.ring_capacity();
    for (uint64_t pos = seg.ring(ring).tail.load(std::memory_order_acquire); pos < head;) {
      Slot s;
      std::memcpy(s.bytes, seg.ring_slots(ring) + (pos % cap) * kSlotBytes, kSlotBytes);
      REQUIRE(s.slots() >= 1);
      REQUIRE(s.slots() <= kMaxRecordSlots);
      s.payload.assign(reinterpret_cast<const char*>(s.bytes) + offsetof(RecordHeader, payload),
                       kInlinePayloadBytes);
      for (uint64_t k = 1; k < s.slots(); ++k)
        s.payload.append(reinterpret_cast<const char*>(seg.ring_slots(ring)) +
                             ((pos + k) % cap) * kSlotBytes,
                         kSlotBytes);
      pos += s.slots();
      out.push_back(s);
    }
    return out;
  }
  // Takes every entry a lookup of `name` may probe, with other strings: `name` cannot be
  // interned in this segment (its records are ordinary, and strings_full counts the failure).
  void fill_probes(const char* name) {
    const uint32_t hash = string_hash(name, static_cast<uint32_t>(std::strlen(name)));
    StringEntry* table = seg.view().strings();
    for (uint32_t i = 0; i < kStringProbeMax; ++i) {
      uint32_t at = (hash + i) & (kStringTableEntries - 1);
      if (at == 0) at = 1;
      StringEntry& e = table[at];
      if (e.state.load(std::memory_order_relaxed) != kStringEmpty) continue;
      e.len = 1;
      e.bytes[0] = '#';
      e.hash = string_hash(e.bytes, 1);
      e.state.store(kStringReady, std::memory_order_release);
    }
  }
  // The bytes of string id `id`, checked as the drainer checks them.
  std::string string(uint32_t id) {
    REQUIRE(id > 0);
    REQUIRE(id < kStringTableEntries);
    const StringEntry& e = seg.view().strings()[id];
    REQUIRE(e.state.load(std::memory_order_acquire) == kStringReady);
    REQUIRE(e.len >= 1);
    REQUIRE(e.len <= kStringMaxBytes);
    CHECK(string_hash(e.bytes, e.len) == e.hash);
    return std::string(e.bytes, e.len);
  }
};

}  // namespace producer_test
