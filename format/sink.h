// What the drainer writes, independent of the output format. The drainer calls one method per
// event, in the order the events must appear in the output; each method writes the event's
// bytes at `out` (room for max_event_bytes()) and returns how many it wrote (0 is allowed: the
// text format has no line for thread metadata). Buffers handed to the writer are framed by
// begin_buffer()/end_buffer(), so a format with blocks (binary) can make every written buffer
// one self-checking block.
//
// Drain thread only. Implementations: TextSink ([STRACE] text, strace_format.h) and
// BinarySink (docs/binary-format.md).
#pragma once

#include "drain/ring_reader.h"

#include <spanring/segment_layout.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spanring {

// Why records were not written ([SPANRING_DROPS] reason=...).
enum class DropReason : uint8_t {
  kRingFull = 1,
  kInvalid = 2,
  kNoRing = 3,
  kCorrupt = 4,
  kVfork = 5,
  kReentrant = 6,
};
const char* drop_reason_name(DropReason r) noexcept;

class Sink {
 public:
  virtual ~Sink() = default;

  // Upper bound of the bytes any one event below writes, framing included.
  virtual size_t max_event_bytes() const noexcept = 0;
  // Framing of one output buffer: begin_buffer writes a header (if the format has one) and
  // end_buffer completes it over the buffer's bytes [0, len). Both return bytes written.
  virtual size_t begin_buffer(char* out) noexcept = 0;
  virtual void end_buffer(char* buffer, size_t len) noexcept = 0;

  // A process seen for the first time in this file, before its first span. `mono_ns`/`wall_ns`
  // is its clock anchor; `cmdline` its command line (NUL-separated arguments, may be empty).
  virtual size_t process(char* out, uint32_t pid, uint32_t tid, uint64_t mono_ns,
                         uint64_t wall_ns, std::string_view cmdline) noexcept = 0;
  // A thread (ring owner) seen for the first time, before its first span.
  virtual size_t thread(char* out, uint32_t pid, uint32_t tid,
                        std::string_view name) noexcept = 0;
  virtual size_t span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec) noexcept = 0;
  virtual size_t drops(char* out, uint32_t pid, uint32_t tid, uint64_t dropped,
                       uint64_t first_seq, uint64_t last_seq, DropReason reason) noexcept = 0;
  // A span open when its owner died. `name` is raw (up to kOpenNameBytes), `name_cut` says it
  // went on. `depth` is its nesting depth.
  virtual size_t unfinished(char* out, uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                            std::string_view name, bool name_cut, uint64_t ts_ns) noexcept = 0;
  // Open spans deeper than kOpenSpanMax, which the ring could not describe.
  virtual size_t undescribed(char* out, uint32_t pid, uint32_t tid,
                             uint32_t count) noexcept = 0;
};

}  // namespace spanring
