// Consumer side of one ring: copies one record out of shared memory and validates the copy.
//
// The drainer treats the segment as untrusted: every counter and length read here is checked
// against the ring's geometry before it is used, each byte of shared memory is read once (into
// the copy), and a failed check returns kCorrupt with the reason instead of reading further.
// Drainer thread only; never writes to the segment.
#pragma once

#include <spanring/segment_layout.h>

#include "src/record_copy.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace spanring {

// One ring's slots as the drainer sees them.
struct RingView {
  const std::byte* slots = nullptr;  // first slot
  uint64_t capacity = 0;             // slots, power of two
};

enum class ReadStatus : uint8_t {
  kRecord,   // `out` holds a valid record occupying out.header.slots slots
  kCorrupt,  // the slots at `pos` are not a valid record; `why` says what is wrong
};

// Reads the record starting at slot counter `pos`, given the producer's published `head`
// (head - pos must be in 1..capacity, checked here too). `min_seq` is the smallest sequence
// number the record may carry (the next expected one).
ReadStatus read_record(const RingView& ring, uint64_t pos, uint64_t head, uint64_t min_seq,
                       RecordCopy& out, std::string& why);

}  // namespace spanring
