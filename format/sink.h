// What the drainer writes through, independent of the output format: it encodes each event
// (format/event.h) into bytes. The drainer calls one method per event, in the order the events
// must appear in the output; each method writes the event's bytes at `out` (room for
// max_event_bytes()) and returns how many it wrote (0 is allowed: the text format has no line
// for thread metadata). Buffers handed to the writer are framed by begin_buffer()/end_buffer(),
// so a format with blocks (binary) can make every written buffer one self-checking block.
//
// Drain thread only; noexcept, and no allocation on these paths. Implementations: TextSink
// ([STRACE] text, format/text_sink.h), BinarySink (docs/binary-format.md,
// format/binary_sink.h) and TeeSink (both at once, drain/tee_sink.h).
#pragma once

#include "format/event.h"

#include <cstddef>

namespace spanring {

class Sink {
 public:
  virtual ~Sink() = default;

  // Upper bound of the bytes any one event below writes, framing included.
  virtual size_t max_event_bytes() const noexcept = 0;
  // Framing of one output buffer: begin_buffer writes a header (if the format has one) and
  // end_buffer completes it over the buffer's bytes [0, len). begin_buffer returns the bytes
  // it wrote.
  virtual size_t begin_buffer(char* out) noexcept = 0;
  virtual void end_buffer(char* buffer, size_t len) noexcept = 0;
  // The next buffer begins a new file (--rotate): a format with a file header (binary) writes
  // it again and numbers blocks from 0. The text format has nothing to do.
  virtual void begin_file() noexcept {}

  virtual size_t process(char* out, const ProcessEvent& e) noexcept = 0;
  virtual size_t thread(char* out, const ThreadEvent& e) noexcept = 0;
  // `e.record` is set: the drainer always has the raw record.
  virtual size_t span(char* out, const SpanEvent& e) noexcept = 0;
  virtual size_t drops(char* out, const DropsEvent& e) noexcept = 0;
  virtual size_t unfinished(char* out, const UnfinishedEvent& e) noexcept = 0;
  virtual size_t undescribed(char* out, const UndescribedEvent& e) noexcept = 0;
};

}  // namespace spanring
