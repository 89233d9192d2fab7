// One reader for both trace formats, for the tools that only look at a trace (`spanring
// convert --to chrome`, `spanring report`): a spanring binary trace (docs/binary-format.md) or
// [STRACE] text (shared/strace-format.md plus spanring's own lines, docs/output.md), told apart
// by the binary magic. Events come out in one form, with names and attributes in their encoded
// [STRACE] spelling (printable ASCII, so they can go into JSON and tables as they are).
//
// `spanring convert --to strace` does not use this: it needs the raw record and goes through
// read_binary_trace() and TextSink (binary_format.h), so that its output is byte-identical.
#pragma once

#include "format/convert_io.h"
#include "format/sink.h"

#include <cstdint>
#include <string_view>

namespace spanring {

struct SpanEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;   // CLOCK_MONOTONIC ns; a device-clock offset when `device`
  uint64_t dur_ns = 0;
  uint64_t inv = 0;
  uint64_t hid = 0;
  uint32_t depth = 0;
  std::string_view name;   // encoded, 1..64 bytes
  std::string_view attrs;  // encoded, 0..192 bytes: `k=v` tokens separated by spaces
  bool device = false;     // attrs hold the token `clk=dev`
};

// Every method has an empty default: a visitor overrides what it needs.
class TraceVisitor {
 public:
  virtual ~TraceVisitor() = default;
  // A process' clock anchor; `cmdline` (NUL-separated arguments) only in binary traces.
  virtual void process(uint32_t /*pid*/, uint32_t /*tid*/, uint64_t /*mono_ns*/,
                       uint64_t /*wall_ns*/, std::string_view /*cmdline*/) {}
  // A thread's name (binary traces only; raw bytes, up to 16).
  virtual void thread(uint32_t /*pid*/, uint32_t /*tid*/, std::string_view /*name*/) {}
  virtual void span(const SpanEvent& /*s*/) {}
  virtual void drops(uint32_t /*pid*/, uint32_t /*tid*/, uint64_t /*dropped*/,
                     uint64_t /*first_seq*/, uint64_t /*last_seq*/, DropReason /*reason*/) {}
  // A span open when its process died. `name` is encoded as on the [SPANRING_UNFINISHED] line.
  virtual void unfinished(uint32_t /*pid*/, uint32_t /*tid*/, uint64_t /*inv*/,
                          uint32_t /*depth*/, std::string_view /*name*/, uint64_t /*ts_ns*/) {}
  // Spans open when their process died that were nested too deep to be described.
  virtual void undescribed(uint32_t /*pid*/, uint32_t /*tid*/, uint64_t /*count*/) {}
};

// Reads `in` whichever format it is in. Empty input is an empty [STRACE] trace (a text drainer
// with nothing to write leaves an empty file).
ReadResult read_trace(TraceInput& in, TraceVisitor& visitor);

// [STRACE] text, parsed strictly: a line holding `[STRACE]` must be a well-formed record per
// shared/strace-format.md, `[CLOCK_ANCHOR]` a well-formed anchor line, and spanring's
// `[SPANRING_DROPS]`/`[SPANRING_UNFINISHED]` lines well formed per docs/output.md; the first
// line that is not gives kCorrupt with its line number and byte offset. Lines with none of these
// tokens are skipped and counted in a note (other log lines of the runtime). Input with bytes
// but no trace line is kNotATrace. A last line without LF is kCut (ignored).
ReadResult read_strace_text(TraceInput& in, TraceVisitor& visitor);

// True when the encoded attributes hold the token `token` (e.g. "clk=dev") as a whole word.
bool has_attr_token(std::string_view attrs, std::string_view token) noexcept;

// The value of the first `key=value` token in `attrs`, or nullopt-like false when absent.
bool find_attr(std::string_view attrs, std::string_view key, std::string_view* value) noexcept;

}  // namespace spanring
