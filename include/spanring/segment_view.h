// SegmentView: one mapping of a spanring segment seen through its validated geometry.
//
// The segment is shared memory that any process with access can write, so the geometry a
// reader trusts (ring count, ring capacity, where the ring table, the journal and the slots
// are) is read from the header exactly once, checked against this build's layout and the
// mapped size (check_header), and copied into the view. Every ring, slot and journal access
// afterwards is computed from that copy and index-checked against it: no offset or size is
// ever read from shared memory twice, so a process that rewrites the header later cannot move
// a reader's accesses outside the mapping (it can only be noticed: geometry_changed()).
//
// Users: the drainer, `spanring clean`, the producer's attach, and the tests' views of a
// segment. Non-owning: the mapping must outlive the view (Segment owns one and hands out its
// view). Copyable; every method is const and thread-safe (it reads only the copy).
#pragma once

#include <spanring/segment_layout.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace spanring {

// Checks a header against this build and the mapped size. Returns an empty string when it is
// usable, else the reason, naming the value found and the one expected. Reads each field once.
std::string check_header(const SegmentHeader& h, uint64_t mapped_bytes);

class SegmentView {
 public:
  // An empty view (no segment); is_valid() is false and no accessor may be called.
  SegmentView() noexcept = default;

  // Validates the header at `base`, a mapping of `mapped_bytes` bytes, and copies its
  // geometry. Returns false with the reason in `why` (as check_header words it) when the
  // mapping is not a usable segment of this build; `out` is then left empty.
  static bool validate(std::byte* base, uint64_t mapped_bytes, SegmentView& out,
                       std::string& why);

  bool is_valid() const noexcept { return base_ != nullptr; }
  std::byte* base() const noexcept { return base_; }
  uint64_t bytes() const noexcept { return bytes_; }  // bytes the layout spans (<= mapped)

  // The header at offset 0. Its geometry fields (ring_count, ring_capacity, *_offset,
  // segment_bytes) must not be used: the copies below are the ones to trust.
  SegmentHeader& header() const noexcept { return *reinterpret_cast<SegmentHeader*>(base_); }

  uint32_t ring_count() const noexcept { return ring_count_; }        // rings
  uint32_t ring_capacity() const noexcept { return ring_capacity_; }  // slots, a power of two

  // Whether `i` names a ring of this segment. Indices that come from shared memory (a journal
  // entry's ring, say) must be checked with this before use.
  bool has_ring(uint64_t i) const noexcept { return i < ring_count_; }

  // Ring i's header and its first slot. Throws std::out_of_range for i >= ring_count(): only a
  // caller's bug can get there, since untrusted indices go through has_ring() first.
  RingHeader& ring(uint32_t i) const;
  std::byte* ring_slots(uint32_t i) const;

  // The drainer's commit journal: ring_count() entries.
  JournalEntry* journal() const noexcept {
    return reinterpret_cast<JournalEntry*>(base_ + journal_offset(ring_count_));
  }

  // The string table: kStringTableEntries entries (an id indexes it directly; id 0 is unused).
  // Its contents are untrusted like the rings': read an entry through a StringTableReader.
  StringEntry* strings() const noexcept {
    return reinterpret_cast<StringEntry*>(base_ + strings_offset(ring_count_));
  }

  // Reads the header's geometry fields again and compares them with the copy: empty when they
  // still agree, else which field now says what (the segment was damaged or tampered with
  // after validation; the view goes on using its copy). For a periodic check, not per record.
  std::string geometry_changed() const;

 private:
  std::byte* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint32_t ring_count_ = 0;
  uint32_t ring_capacity_ = 0;
};

}  // namespace spanring
