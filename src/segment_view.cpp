// SegmentView (include/spanring/segment_view.h): the header validated once, geometry copied.
#include <spanring/segment_view.h>

#include <cstdio>
#include <stdexcept>

namespace spanring {
namespace {

bool is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

std::string check_header(const SegmentHeader& h, uint64_t mapped_bytes) {
  char buf[256];
  // acquire: pairs with the creator's release of magic, after every other header field.
  const uint64_t magic = h.magic.load(std::memory_order_acquire);
  if (magic != kSegmentMagic) {
    std::snprintf(buf, sizeof buf, "not a spanring segment (magic %016llx, expected %016llx)",
                  static_cast<unsigned long long>(magic),
                  static_cast<unsigned long long>(kSegmentMagic));
    return buf;
  }
  // One read of each field into a local: the values checked are the values reported.
  const uint32_t version = h.layout_version;
  const uint32_t header_bytes = h.header_bytes;
  const uint32_t slot_bytes = h.slot_bytes;
  const uint32_t ring_header_bytes = h.ring_header_bytes;
  const uint32_t ring_count = h.ring_count;
  const uint32_t ring_capacity = h.ring_capacity;
  const uint64_t rings_at = h.rings_offset;
  const uint64_t journal_at = h.journal_offset;
  const uint64_t slots_at = h.slots_offset;
  const uint64_t total = h.segment_bytes;
  const uint64_t strings_at = h.strings_offset;
  const uint32_t string_entries = h.string_entries;
  const uint32_t string_entry_bytes = h.string_entry_bytes;
  if (version != kLayoutVersion) {
    std::snprintf(buf, sizeof buf,
                  "segment layout version %u, this build reads version %u only", version,
                  kLayoutVersion);
    return buf;
  }
  if (header_bytes != kSegmentHeaderBytes || slot_bytes != kSlotBytes ||
      ring_header_bytes != kRingHeaderBytes) {
    std::snprintf(buf, sizeof buf,
                  "segment record layout differs (header %u/%u, slot %u/%u, ring header %u/%u "
                  "bytes: found/expected)",
                  header_bytes, kSegmentHeaderBytes, slot_bytes, kSlotBytes, ring_header_bytes,
                  kRingHeaderBytes);
    return buf;
  }
  if (ring_count == 0 || ring_count > kMaxRingCount || !is_pow2(ring_capacity) ||
      ring_capacity < kMinRingCapacity || ring_capacity > kMaxRingCapacity) {
    std::snprintf(buf, sizeof buf, "segment has an invalid ring table (%u rings of %u slots)",
                  ring_count, ring_capacity);
    return buf;
  }
  const uint64_t want = segment_bytes(ring_count, ring_capacity);
  if (rings_at != rings_offset() || journal_at != journal_offset(ring_count) ||
      slots_at != slots_offset(ring_count) || total != want || mapped_bytes < want) {
    std::snprintf(buf, sizeof buf,
                  "segment size mismatch: header says %llu bytes, layout needs %llu, "
                  "object has %llu",
                  static_cast<unsigned long long>(total), static_cast<unsigned long long>(want),
                  static_cast<unsigned long long>(mapped_bytes));
    return buf;
  }
  if (string_entries != kStringTableEntries || string_entry_bytes != sizeof(StringEntry) ||
      strings_at != strings_offset(ring_count)) {
    std::snprintf(buf, sizeof buf,
                  "segment string table differs (%u entries of %u bytes at %llu; expected %u of "
                  "%u at %llu)",
                  string_entries, string_entry_bytes, static_cast<unsigned long long>(strings_at),
                  kStringTableEntries, static_cast<unsigned>(sizeof(StringEntry)),
                  static_cast<unsigned long long>(strings_offset(ring_count)));
    return buf;
  }
  return {};
}

bool SegmentView::validate(std::byte* base, uint64_t mapped_bytes, SegmentView& out,
                           std::string& why) {
  out = SegmentView{};
  if (base == nullptr || mapped_bytes < kSegmentHeaderBytes) {
    why = "mapping of " + std::to_string(mapped_bytes) +
          " bytes is smaller than a spanring header (" + std::to_string(kSegmentHeaderBytes) +
          ")";
    return false;
  }
  const auto& h = *reinterpret_cast<const SegmentHeader*>(base);
  // Copy the geometry first, then check the copy: a field rewritten between the check and the
  // copy would otherwise get in unchecked.
  SegmentHeader copy;
  copy.magic.store(h.magic.load(std::memory_order_acquire), std::memory_order_relaxed);
  copy.layout_version = h.layout_version;
  copy.header_bytes = h.header_bytes;
  copy.slot_bytes = h.slot_bytes;
  copy.ring_header_bytes = h.ring_header_bytes;
  copy.ring_count = h.ring_count;
  copy.ring_capacity = h.ring_capacity;
  copy.rings_offset = h.rings_offset;
  copy.journal_offset = h.journal_offset;
  copy.slots_offset = h.slots_offset;
  copy.segment_bytes = h.segment_bytes;
  copy.strings_offset = h.strings_offset;
  copy.string_entries = h.string_entries;
  copy.string_entry_bytes = h.string_entry_bytes;
  why = check_header(copy, mapped_bytes);
  if (!why.empty()) return false;
  out.base_ = base;
  out.bytes_ = copy.segment_bytes;
  out.ring_count_ = copy.ring_count;
  out.ring_capacity_ = copy.ring_capacity;
  return true;
}

RingHeader& SegmentView::ring(uint32_t i) const {
  if (i >= ring_count_)
    throw std::out_of_range("ring " + std::to_string(i) + " of a segment of " +
                            std::to_string(ring_count_) + " rings");
  return reinterpret_cast<RingHeader*>(base_ + rings_offset())[i];
}

std::byte* SegmentView::ring_slots(uint32_t i) const {
  if (i >= ring_count_)
    throw std::out_of_range("ring " + std::to_string(i) + " of a segment of " +
                            std::to_string(ring_count_) + " rings");
  return base_ + slots_offset(ring_count_) + uint64_t{i} * ring_capacity_ * kSlotBytes;
}

std::string SegmentView::geometry_changed() const {
  const SegmentHeader& h = header();
  std::string out;
  auto compare = [&out](const char* field, uint64_t found, uint64_t expected) {
    if (found == expected) return;
    if (!out.empty()) out += ", ";
    out += std::string(field) + " " + std::to_string(found) + " (was " +
           std::to_string(expected) + ")";
  };
  compare("ring_count", h.ring_count, ring_count_);
  compare("ring_capacity", h.ring_capacity, ring_capacity_);
  compare("rings_offset", h.rings_offset, rings_offset());
  compare("journal_offset", h.journal_offset, journal_offset(ring_count_));
  compare("slots_offset", h.slots_offset, slots_offset(ring_count_));
  compare("strings_offset", h.strings_offset, strings_offset(ring_count_));
  compare("string_entries", h.string_entries, kStringTableEntries);
  compare("segment_bytes", h.segment_bytes, bytes_);
  compare("slot_bytes", h.slot_bytes, kSlotBytes);
  compare("ring_header_bytes", h.ring_header_bytes, kRingHeaderBytes);
  compare("layout_version", h.layout_version, kLayoutVersion);
  return out;
}

}  // namespace spanring
