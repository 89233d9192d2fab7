// RecordCopy: one span record as the drainer copied it out of a ring, validated; the unit of
// data from the ring reader to every output format (format/) and back out of the binary reader.
// Plain data, no shared memory: any thread may hold one.
#pragma once

#include <spanring/segment_layout.h>

namespace spanring {

// A validated private copy of one record.
struct RecordCopy {
  // As read, except that packed attributes (kRecordPackedAttrs) are already unpacked: flags
  // without that bit, attrs_len the text's length; and a compact record (kRecordCompact) is
  // decoded into the ordinary record of the same span (its seq, its resolved name and attribute
  // text, flags without kRecordCompact). header.payload is not used (see below).
  RecordHeader header;
  char payload[kNameRawMax + kAttrsPackedMax];  // raw name bytes, then raw attribute bytes
  const char* name() const noexcept { return payload; }
  const char* attrs() const noexcept { return payload + header.name_len; }
};

}  // namespace spanring
