// [STRACE] field encoding and truncation (shared/strace-format.md, "Encoding of name and
// attrs" and "Truncation"). Used by the drainer (consumer side) and by readers; the producer
// never encodes. Pure functions: any thread, no allocation, no syscall.
#pragma once

#include <spanring/segment_layout.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spanring {

// Encodes the name bytes in[0, len) (input ends early at the first NUL) into out, which must
// have room for kNameCap (64) bytes. Copied as is: printable ASCII 0x20-0x7E except % [ ] space
// and =; every other byte becomes %XX (uppercase hex). Cut at 64 encoded bytes: whole units
// only, then `~` (an at-cap output first loses its last unit). Returns the bytes written,
// 0..64; 0 only for an empty name (which a [STRACE] consumer rejects: the caller must not emit
// it as a record).
size_t encode_name(const char* in, size_t len, char* out) noexcept;

// The same for attributes, where space and = stay raw (they are the k=v grammar); the cap is
// kAttrsCap (192) encoded bytes, and out must have room for 192 bytes. Returns 0..192.
size_t encode_attrs(const char* in, size_t len, char* out) noexcept;

// Whether attributes hold the token `clk=dev` (a space-separated key=value pair): the span's ts
// is on a device clock, not CLOCK_MONOTONIC (shared/strace-format.md). Raw or encoded
// attributes alike (the token and its separators are spelled the same in both): the producer
// asks it of raw bytes, the trace readers of the encoded [STRACE] spelling. Pure.
bool is_device_attrs(std::string_view attrs) noexcept;

}  // namespace spanring
