// Formatting of drainer output lines in the [STRACE] text format (shared/strace-format.md) and
// of spanring's own report lines, which [STRACE] parsers ignore (they hold no `[STRACE]` or
// `[CLOCK_ANCHOR]` token).
//
// Each function writes one complete line, LF included, at `out`, which must have room for
// kMaxLineBytes, and returns the bytes written. No allocation, no snprintf.
#pragma once

#include "drain/ring_reader.h"
#include "format/sink.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spanring {

// The longest [STRACE] line: prefix and fixed tokens with 20-digit numbers, a 64-byte name and
// 192 bytes of attributes stay under 512 bytes (the spec keeps lines atomic for pipes).
inline constexpr size_t kMaxLineBytes = 512;

// One span record. Prefix `[mono_ns=E][T0x<P>]`: E = ts + dur (the span's end, the time the
// original logger would have written the line), P = the tid in lowercase hex (spanring has no
// pthread_self() of the producer; documented in docs/output.md).
size_t format_span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec);

// The per-process clock anchor line.
size_t format_anchor(char* out, uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns);

// A loss report: records [first_seq, last_seq] of ring owner (pid, tid) were not written.
// reason: ring_full | invalid | no_ring | corrupt | vfork (docs/output.md).
size_t format_drops(char* out, uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
                    uint64_t last_seq, const char* reason);

// A span open when its owner died, and the count of those too deep to describe.
size_t format_unfinished(char* out, uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                         std::string_view name, bool name_cut, uint64_t ts_ns);
size_t format_undescribed(char* out, uint32_t pid, uint32_t tid, uint32_t count);

// True when the raw attributes hold the token `clk=dev` (a device-clock span).
bool is_device_span(const RecordCopy& rec) noexcept;

// The [STRACE] text format as a Sink: one line per event, no buffer framing, no metadata lines.
class TextSink final : public Sink {
 public:
  size_t max_event_bytes() const noexcept override { return kMaxLineBytes; }
  size_t begin_buffer(char*) noexcept override { return 0; }
  void end_buffer(char*, size_t) noexcept override {}
  size_t process(char* out, uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
                 std::string_view) noexcept override {
    return format_anchor(out, pid, tid, mono_ns, wall_ns);
  }
  size_t thread(char*, uint32_t, uint32_t, std::string_view) noexcept override { return 0; }
  size_t span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec) noexcept override {
    return format_span(out, pid, tid, rec);
  }
  size_t drops(char* out, uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
               uint64_t last_seq, DropReason reason) noexcept override {
    return format_drops(out, pid, tid, dropped, first_seq, last_seq, drop_reason_name(reason));
  }
  size_t unfinished(char* out, uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                    std::string_view name, bool name_cut, uint64_t ts_ns) noexcept override {
    return format_unfinished(out, pid, tid, inv, depth, name, name_cut, ts_ns);
  }
  size_t undescribed(char* out, uint32_t pid, uint32_t tid, uint32_t count) noexcept override {
    return format_undescribed(out, pid, tid, count);
  }
};

}  // namespace spanring
