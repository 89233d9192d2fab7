// Formatting of drainer output lines in the [STRACE] text format (shared/strace-format.md) and
// of spanring's own report lines, which [STRACE] parsers ignore (they hold no `[STRACE]` or
// `[CLOCK_ANCHOR]` token).
//
// Each function writes one complete line, LF included, at `out`, which must have room for
// kMaxLineBytes, and returns the bytes written. No allocation, no snprintf.
#pragma once

#include "ring_reader.h"

#include <cstddef>
#include <cstdint>

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
// reason: ring_full | invalid | no_ring | corrupt | unwritten.
size_t format_drops(char* out, uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
                    uint64_t last_seq, const char* reason);

// True when the raw attributes hold the token `clk=dev` (a device-clock span).
bool is_device_span(const RecordCopy& rec) noexcept;

}  // namespace spanring
