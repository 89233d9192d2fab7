// RingReader::read (src/ring.h): one record out of shared memory, copied once, then checked.
#include "src/ring.h"

#include <spanring/packed_attrs.h>

#include <cstring>

namespace spanring {

ReadStatus RingReader::read(uint64_t head, uint64_t min_seq, RecordCopy& out, std::string& why) {
  const uint64_t pos = position_;
  const uint64_t mask = capacity_ - 1;
  const uint64_t avail = head - pos;  // unsigned: wraps correctly at 2^64
  if (avail == 0 || avail > capacity_) {
    why = "head " + std::to_string(head) + " is not within one ring of the read position " +
          std::to_string(pos);
    return ReadStatus::kCorrupt;
  }
  std::memcpy(&out.header, slots_ + (pos & mask) * kSlotBytes, kSlotBytes);
  const RecordHeader& h = out.header;
  if (h.slots == 0 || h.slots > kMaxRecordSlots || h.slots > avail) {
    why = "record at slot " + std::to_string(pos) + " claims " + std::to_string(h.slots) +
          " slots (" + std::to_string(avail) + " published)";
    return ReadStatus::kCorrupt;
  }
  const bool packed = (h.flags & kRecordPackedAttrs) != 0;
  if (h.name_len > kNameRawMax || h.attrs_len > (packed ? kAttrsPackedMax : kAttrsRawMax) ||
      (packed && h.attrs_len == 0) ||
      h.slots != record_slots(uint32_t{h.name_len} + h.attrs_len)) {
    why = "record at slot " + std::to_string(pos) + " has inconsistent lengths (name " +
          std::to_string(h.name_len) + ", attrs " + std::to_string(h.attrs_len) + ", slots " +
          std::to_string(h.slots) + ")";
    return ReadStatus::kCorrupt;
  }
  // At most one marker bit; a marker carries no payload, a span has a name.
  const uint16_t marker = h.flags & kRecordMarkers;
  if ((h.flags & ~kRecordFlagsKnown) != 0 || (marker & (marker - 1)) != 0 ||
      (marker != 0 && (h.name_len != 0 || h.attrs_len != 0 || (h.flags & kRecordTsc) != 0)) ||
      (marker == 0 && h.name_len == 0) ||
      ((marker & kRecordReentrant) != 0 && (h.dur_ns == 0 || h.dur_ns > kReentrantMarkerMax))) {
    why = "record at slot " + std::to_string(pos) + " has bad flags " + std::to_string(h.flags);
    return ReadStatus::kCorrupt;
  }
  if (h.seq < min_seq) {
    why = "record at slot " + std::to_string(pos) + " has sequence " + std::to_string(h.seq) +
          ", expected at least " + std::to_string(min_seq);
    return ReadStatus::kCorrupt;
  }
  // Payload: first kInlinePayloadBytes from the header slot, the rest from the next slots.
  const uint32_t total = uint32_t{h.name_len} + h.attrs_len;
  const uint32_t inline_n = total < kInlinePayloadBytes ? total : kInlinePayloadBytes;
  std::memcpy(out.payload, h.payload, inline_n);
  uint32_t done = inline_n;
  for (uint64_t s = 1; done < total; ++s) {
    const uint32_t n = total - done < kSlotBytes ? total - done : kSlotBytes;
    std::memcpy(out.payload + done, slots_ + ((pos + s) & mask) * kSlotBytes, n);
    done += n;
  }
  // The producer measures names with strnlen: a NUL inside one is corruption. (Attributes may
  // hold a NUL from a string_view value; the encoder ends them there, as the spec says.)
  if (std::memchr(out.payload, 0, h.name_len) != nullptr) {
    why = "record at slot " + std::to_string(pos) + " has a NUL byte inside its name";
    return ReadStatus::kCorrupt;
  }
  if (packed) {
    // Integer attributes the producer stored packed: from here on the copy holds their text, as
    // if the producer had formatted it (cut at kAttrsRawMax raw bytes in the same way).
    char in[kAttrsPackedMax];
    std::memcpy(in, out.payload + h.name_len, h.attrs_len);
    const int32_t n = unpack_attrs(in, h.attrs_len, out.payload + h.name_len, kAttrsRawMax);
    if (n < 0) {
      why = "record at slot " + std::to_string(pos) + " has malformed packed attributes";
      return ReadStatus::kCorrupt;
    }
    out.header.attrs_len = static_cast<uint16_t>(n);
    out.header.flags = static_cast<uint16_t>(h.flags & ~kRecordPackedAttrs);
  }
  position_ = pos + h.slots;
  return ReadStatus::kRecord;
}

}  // namespace spanring
