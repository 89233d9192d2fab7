// RingReader::read (src/ring.h): one record out of shared memory, copied once, then checked.
#include "src/ring.h"

#include <spanring/packed_attrs.h>

#include <charconv>
#include <cstring>

namespace spanring {
namespace {

// Appends `key=value` for one compact attribute at `p` (no cut: the caller's buffer holds the
// longest list) and returns the end. The text is what pack_token/unpack_attrs give for the same
// attribute: the value in decimal, `-` and the magnitude when it is negative.
char* put_attr(char* p, std::string_view key, uint32_t value, bool is_signed) noexcept {
  RingWriter::copy_bytes(p, key.data(), static_cast<uint32_t>(key.size()));
  p += key.size();
  *p++ = '=';
  uint32_t magnitude = value;
  if (is_signed && static_cast<int32_t>(value) < 0) {
    *p++ = '-';
    magnitude = 0u - value;  // 2^31 for INT32_MIN: exact in uint32_t
  }
  return std::to_chars(p, p + 10, magnitude).ptr;
}

}  // namespace

std::optional<uint64_t> RingReader::count_records(uint64_t head) const noexcept {
  const uint64_t mask = capacity_ - 1;
  uint64_t records = 0;
  for (uint64_t pos = position_; pos != head; ++records) {
    RecordHeader h;
    std::memcpy(&h, slots_ + (pos & mask) * kSlotBytes, sizeof h);  // one read of shared memory
    if (h.slots == 0 || h.slots > kMaxRecordSlots || h.slots > head - pos) return std::nullopt;
    pos += h.slots;
  }
  return records;
}

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
  // `flags` sits at the same offset in both record kinds (segment_layout.h).
  if ((h.flags & kRecordCompact) != 0) return read_compact(pos, min_seq, out, why);
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

ReadStatus RingReader::read_compact(uint64_t pos, uint64_t min_seq, RecordCopy& out,
                                    std::string& why) {
  CompactRecord c;
  std::memcpy(&c, &out.header, sizeof c);  // the private copy read() made, reinterpreted
  const uint32_t count = c.attrs & 0x7u;
  const bool text = (c.attrs & kCompactAttrsText) != 0;
  // Framing first: a compact record is one slot, a known flag set and an attribute count in
  // range; anything else is ring corruption (the reader cannot know what follows it).
  if (c.slots != 1) {
    why = "compact record at slot " + std::to_string(pos) + " claims " +
          std::to_string(c.slots) + " slots";
    return ReadStatus::kCorrupt;
  }
  if ((c.flags & ~(kRecordCompact | kRecordTsc)) != 0 || count > kCompactAttrs ||
      (text && count != 0)) {
    why = "compact record at slot " + std::to_string(pos) + " has bad flags " +
          std::to_string(c.flags) + " or attributes byte " + std::to_string(c.attrs);
    return ReadStatus::kCorrupt;
  }
  // It directly follows the ring's previous record: its sequence number is the next expected.
  if (c.seq_lo != static_cast<uint32_t>(min_seq)) {
    why = "compact record at slot " + std::to_string(pos) + " has sequence low bits " +
          std::to_string(c.seq_lo) + ", expected " +
          std::to_string(static_cast<uint32_t>(min_seq)) + " (sequence " +
          std::to_string(min_seq) + ")";
    return ReadStatus::kCorrupt;
  }
  RecordHeader& h = out.header;
  h.seq = min_seq;
  h.ts_ns = c.ts_ns;
  h.dur_ns = c.dur_ns;
  h.inv = c.inv;
  h.hid = c.hid;
  h.depth = c.depth;
  h.name_len = 0;
  h.attrs_len = 0;
  h.slots = 1;
  h.flags = static_cast<uint16_t>(c.flags & kRecordTsc);
  position_ = pos + 1;  // consumed, whether its strings resolve or not

  std::string_view name;
  if (strings_ == nullptr || !strings_->resolve(c.name, name, why)) {
    if (strings_ == nullptr) why = "no string table to resolve name id " + std::to_string(c.name);
    why = "compact record seq " + std::to_string(min_seq) + " at slot " + std::to_string(pos) +
          ": name: " + why;
    return ReadStatus::kBadString;
  }
  RingWriter::copy_bytes(out.payload, name.data(), static_cast<uint32_t>(name.size()));
  h.name_len = static_cast<uint16_t>(name.size());  // 1..kStringMaxBytes <= kNameRawMax
  char* const attrs = out.payload + name.size();
  if (text) {
    // One interned attribute text, raw like inline attributes (<= kStringMaxBytes, no cut).
    std::string_view t;
    if (!strings_->resolve(c.keys[0], t, why)) {
      why = "compact record seq " + std::to_string(min_seq) + " at slot " +
            std::to_string(pos) + ": attribute text: " + why;
      return ReadStatus::kBadString;
    }
    RingWriter::copy_bytes(attrs, t.data(), static_cast<uint32_t>(t.size()));
    h.attrs_len = static_cast<uint16_t>(t.size());
    return ReadStatus::kRecord;
  }
  if (count == 0) return ReadStatus::kRecord;
  // `k1=v1 k2=v2 ...` as unpack_attrs formats packed integers, cut at kAttrsRawMax raw bytes
  // alike: formatted whole here (at most kCompactAttrs keys of kStringMaxBytes, `=`, 11
  // characters of value, and a space each), then cut by the copy.
  char buf[kCompactAttrs * (kStringMaxBytes + 13)];
  char* p = buf;
  for (uint32_t i = 0; i < count; ++i) {
    std::string_view key;
    if (!strings_->resolve(c.keys[i], key, why)) {
      why = "compact record seq " + std::to_string(min_seq) + " at slot " +
            std::to_string(pos) + ": key " + std::to_string(i) + ": " + why;
      return ReadStatus::kBadString;
    }
    if (i != 0) *p++ = ' ';
    p = put_attr(p, key, c.values[i], (c.attrs >> (4 + i) & 1u) != 0);
  }
  const auto n = static_cast<uint32_t>(p - buf);
  const uint32_t kept = n < kAttrsRawMax ? n : kAttrsRawMax;
  RingWriter::copy_bytes(attrs, buf, kept);
  h.attrs_len = static_cast<uint16_t>(kept);
  return ReadStatus::kRecord;
}

}  // namespace spanring
