// IdSpan: a span whose name and attribute keys are string ids its caller interned itself, for
// language bindings whose names are run-time strings (the Python package, python/spanring/):
// the binding keeps its own cache of ids (keyed by its own string objects, checked against
// attach_generation() on every use), so the library needs no pointer-keyed cache for them. A span
// begun here shares everything a Span has: the thread's state, ring, depth and invocation, the
// open-span note, the counter clock; it ends as one CompactRecord when it can (ids, 32-bit
// values, duration below 2^32 ticks, depth <= 255, no drop since the ring's last record) and
// otherwise as the ordinary record a Span of the same name and attributes would write, from
// text the caller gives (id_span_end_text). The drainer prints the same `[STRACE]` line for
// either record.
//
// Not installed, not an API: the package links the shared libspanring and includes this from
// the source tree. Thread-safety: an IdSpan is used by the thread that began it (its depth is
// that thread's); intern_string is lock-free and any thread's. Nothing here throws, blocks or
// makes a syscall after the thread's first record; a record that cannot be stored is dropped
// and counted in the segment, as every record is.
#pragma once

#include <spanring/span.h>

#include <atomic>
#include <cstdint>

namespace spanring {
namespace detail {

// One span begun by id_span_begin. Plain data, held by the caller (the Python span object).
struct IdSpan {
  int64_t start;     // TSC ticks when tsc, else CLOCK_MONOTONIC ns
  int64_t end;       // the end's clock read, kept by id_span_end_compact for id_span_end_text
  uint64_t inv;      // the thread's invocation and callable hash at begin
  uint64_t hid;
  uint32_t depth;    // spans open on the thread around this one
  uint16_t name_id;  // the name's string id (1..kStringTableEntries-1)
  uint8_t tsc;       // 1: start/end are counter ticks (the record carries kRecordTsc)
  uint8_t active;    // 0: begin stored nothing (no thread state, vfork child): end does nothing
};

// The string id of `len` raw bytes (1..kStringMaxBytes, no NUL) in the segment's string table,
// interning them on first use in the segment (every process shares the table, which never
// frees an entry: intern strings that recur, not one per record). 0 when tracing is disabled
// or the bytes cannot be interned (length, NUL, table full). Lock-free, no syscall, any thread.
// The id is valid while attach_generation() returns what it returned before the call.
uint16_t intern_string(const char* bytes, uint32_t len) noexcept;

// Which attach of libspanring the string ids belong to (span.h, g_attach_generation): ids a
// caller cached under another generation must be interned again. A fork keeps the generation
// (the child keeps the segment and its ids). Relaxed: written before tracing is published.
inline uint32_t attach_generation() noexcept {
  return g_attach_generation.load(std::memory_order_relaxed);
}

// Begins span `s` named by string id `name_id` (from intern_string under the current
// generation; tracing enabled): reads the clock, raises the thread's depth, notes the span in
// the ring's open-span stack (a killed process reports it). The thread's first span claims its
// ring (syscalls). Sets s.active = 0 when nothing can be recorded (counted in the segment).
void id_span_begin(IdSpan& s, uint16_t name_id) noexcept;

// Ends `s` on the thread that began it as one CompactRecord: `count` (0..kCompactAttrs)
// attributes whose key ids are `keys` (key i in bits 16i..), values `values` (low 32 bits; bit i
// of `negative`: value i is negative, two's complement). Returns true when the span is done
// (written, or s was inactive); false when it cannot be compact (long duration, depth > 255,
// a drop since the ring's last record, a full ring, the thread's first record or a clock other
// than the counter): then nothing is written yet, the end time is kept in s.end, and the caller
// must call id_span_end_text.
bool id_span_end_compact(IdSpan& s, const uint32_t* values, uint64_t keys, uint32_t count,
                         uint32_t negative) noexcept;

// Ends `s` (after id_span_end_compact returned false) as an ordinary record: `name` (the raw
// bytes of the name s.name_id stands for, at most kNameRawMax read) and `attrs` (the raw
// attribute text, `k=v` tokens separated by one space, at most kAttrsRawMax read: past it the
// drainer cuts with `~`). The same record a Span of that name and attributes writes.
void id_span_end_text(IdSpan& s, const char* name, uint32_t name_len, const char* attrs,
                      uint32_t attrs_len) noexcept;

}  // namespace detail
}  // namespace spanring
