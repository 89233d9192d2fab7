// RingReader::read (src/ring.h): one record out of shared memory, copied once, then checked.
#include "src/ring.h"

#include "src/record_decode.h"

#include <charconv>
#include <cstring>

namespace spanring {

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
  if (!check_ordinary_frame(h, avail, min_seq, RecordWhere{"record at slot ", pos}, why))
    return ReadStatus::kCorrupt;
  // Payload: the kInlinePayloadBytes of the header slot, then the record's next slots whole
  // (each wraps on its own; slots <= avail was checked): fixed-size copies, no libc call.
  std::memcpy(out.payload, h.payload, kInlinePayloadBytes);
  for (uint64_t s = 1; s < h.slots; ++s)
    std::memcpy(out.payload + kInlinePayloadBytes + (s - 1) * kSlotBytes,
                slots_ + ((pos + s) & mask) * kSlotBytes, kSlotBytes);
  if (!finish_ordinary(out, RecordWhere{"record at slot ", pos}, why))
    return ReadStatus::kCorrupt;
  position_ = pos + h.slots;
  return ReadStatus::kRecord;
}

ReadStatus RingReader::read_compact(uint64_t pos, uint64_t min_seq, RecordCopy& out,
                                    std::string& why) {
  CompactRecord c;
  std::memcpy(&c, &out.header, sizeof c);  // the private copy read() made, reinterpreted
  // Framing first: anything wrong there is ring corruption (the reader cannot know what
  // follows). It directly follows the ring's previous record: its sequence number is the next
  // expected one.
  if (!check_compact_frame(c, min_seq, true, RecordWhere{"compact record at slot ", pos},
                           why))
    return ReadStatus::kCorrupt;
  position_ = pos + 1;  // consumed, whether its strings resolve or not
  auto resolve = [this](uint32_t id, std::string_view& bytes, std::string& w) {
    if (strings_ == nullptr) {
      w = "no string table to resolve id " + std::to_string(id);
      return false;
    }
    return strings_->resolve(id, bytes, w);
  };
  if (!decode_compact(c, min_seq, resolve, out,
                      RecordWhere{"compact record seq ", min_seq, " at slot ", pos},
                      why))
    return ReadStatus::kBadString;
  return ReadStatus::kRecord;
}

}  // namespace spanring
