// RecordCopy: one span record as the drainer copied it out of a ring, validated; the unit of
// data from the ring reader to every output format (format/) and back out of the binary reader.
// Plain data, no shared memory: any thread may hold one.
#pragma once

#include <spanring/segment_layout.h>

#include <cstdint>

namespace spanring {

// A validated private copy of one record.
struct RecordCopy {
  // Room: a name and, after it, what the attribute decoders write before they cut the text at
  // kAttrsRawMax (record_decode.h: kAttrsWriteRoom), which is more than a record's whole slots.
  static constexpr uint32_t kPayloadBytes = 480;
  static_assert(kPayloadBytes >= kInlinePayloadBytes + (kMaxRecordSlots - 1) * kSlotBytes);
  // As read, except that packed attributes (kRecordPackedAttrs) are already unpacked: flags
  // without that bit, attrs_len the text's length; and a compact record (kRecordCompact) is
  // decoded into the ordinary record of the same span (its seq, its resolved name and attribute
  // text, flags without kRecordCompact). header.payload is not used (see below).
  RecordHeader header;
  // Raw name bytes, then raw attribute bytes; room for a record's whole slots (the readers copy
  // them whole: record_decode.h), for the attribute decoders' writes past the cut, and for
  // reads of a field rounded up to 16 bytes (the formatter's and the NUL check's vectors).
  char payload[kPayloadBytes];
  const char* name() const noexcept { return payload; }
  const char* attrs() const noexcept { return payload + header.name_len; }
};

}  // namespace spanring
