// Reading a binary trace (format/binary_format.h, docs/binary-format.md) back into events
// (format/event.h). Cold path, one thread; the input is untrusted and every length is checked
// before it is used.
#pragma once

#include "format/binary_format.h"
#include "format/convert_io.h"
#include "format/event_visitor.h"

#include <cstdint>
#include <memory>
#include <string_view>

namespace spanring {

// Reads a binary trace from the current position of `in` (its start) to its end, delivering
// the events of every block whose checksums and events are all well formed, in file order.
// Spans carry their raw record (SpanEvent::record: header fields as the drainer read them,
// slots recomputed, flags 0), unfinished spans their raw name. Never throws for the content
// (only TraceInput's read errors and the visitor's own exceptions propagate); every problem is
// in the result: kNotATrace (no magic), kCut (the input ends inside the file header or a
// block: every complete block before it was delivered), kCorrupt (bad magic, version,
// checksum, length or event: names the byte offset; earlier blocks were delivered, nothing of
// the bad block was). `last_block_seq`, when not null, receives the last complete block's
// sequence number (or UINT64_MAX when there was none).
//
// `carry`, when not null, holds what version-3 and -4 events define for later ones (the string
// definitions, event 7, and the clock samples, event 9) across calls: a reader that reads one file in pieces (each block alone
// behind the file header, as `export --follow` does) passes the same BinaryCarry to each call.
class BinaryCarry {
 public:
  BinaryCarry();
  ~BinaryCarry();
  BinaryCarry(const BinaryCarry&) = delete;
  BinaryCarry& operator=(const BinaryCarry&) = delete;
  void reset();  // forgets everything carried (a file read again from its start)
  struct State;
  std::unique_ptr<State> state;
};
ReadResult read_binary_trace(TraceInput& in, EventVisitor& visitor,
                             uint64_t* last_block_seq = nullptr, BinaryCarry* carry = nullptr);

// True when `first_bytes` (the start of a file) begins with the binary magic. Pure.
bool is_binary_trace(std::string_view first_bytes) noexcept;

}  // namespace spanring
