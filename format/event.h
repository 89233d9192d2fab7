// The one event vocabulary of a trace: what the drainer writes (through a Sink, format/sink.h),
// what the binary and the [STRACE] text readers deliver (to an EventVisitor,
// format/event_visitor.h), and what the tools consume. One struct per event, in the order the
// drainer emits them for a thread: process (first record of a pid), thread (first record of a
// ring owner), spans, drops; unfinished and undescribed when an owner died with spans open.
//
// Events are plain values over borrowed bytes: every string_view and the RecordCopy pointer
// point into the caller's memory and are valid only for the call that delivers the event.
// Any thread may build one; none is shared.
//
// Names and attributes have two spellings. The drainer and the binary reader have the raw bytes
// (SpanEvent::record, UnfinishedEvent::raw_name), which TextSink encodes exactly once when it
// writes [STRACE] text, so binary -> text conversion is byte-identical to the text drainer. The
// text reader has only the encoded spelling as it stands on the line (SpanEvent::name/attrs,
// UnfinishedEvent::spelled_name). EventSpelling (format/event_spelling.h) gives a consumer the
// encoded spelling of either.
#pragma once

#include "src/record_copy.h"

#include <cstdint>
#include <string_view>

namespace spanring {

// Why records were not written ([SPANRING_DROPS] reason=..., docs/output.md).
enum class DropReason : uint8_t {
  kRingFull = 1,
  kInvalid = 2,
  kNoRing = 3,
  kCorrupt = 4,
  kVfork = 5,
  kReentrant = 6,
  kMaxSize = 7,  // the output reached --max-size: consumed, counted, not written
  // A flight-recorder snapshot (drain/flight_recorder.h): the records were drained, but pushed
  // out of the drainer's in-memory window by newer ones before the snapshot was taken.
  kOverwritten = 8,
};
// The reason's [STRACE] spelling ("ring_full", ...); "unknown" for a value outside the enum.
const char* drop_reason_name(DropReason r) noexcept;

// A process seen for the first time in a file, before its first span.
struct ProcessEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;       // the thread whose first record announced the process
  uint64_t mono_ns = 0;   // clock anchor: CLOCK_MONOTONIC ns ...
  uint64_t wall_ns = 0;   // ... and CLOCK_REALTIME ns read together
  std::string_view cmdline;  // NUL-separated arguments; empty when unknown (text traces)
};

// A thread (ring owner) seen for the first time, before its first span. Text traces have none.
struct ThreadEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string_view name;  // raw bytes, up to 16 (the kernel's comm)
};

// One span record. The numeric fields are always set. Exactly one spelling of name and
// attributes is present: `record` (raw, from the drainer and the binary reader) or `name` and
// `attrs` (encoded, from the text reader, with `record` null).
struct SpanEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t ts_ns = 0;   // CLOCK_MONOTONIC ns; a device-clock offset for clk=dev spans
  uint64_t dur_ns = 0;
  uint64_t inv = 0;
  uint64_t hid = 0;
  uint32_t depth = 0;
  const RecordCopy* record = nullptr;  // the record as drained: header and raw bytes
  std::string_view name;   // encoded, 1..64 bytes (text input only)
  std::string_view attrs;  // encoded, 0..192 bytes of `k=v` tokens (text input only)

  // The event of a drained (or binary-read) record of ring owner (pid, tid).
  static SpanEvent of(uint32_t pid, uint32_t tid, const RecordCopy& rec) noexcept {
    const RecordHeader& h = rec.header;
    return SpanEvent{pid, tid, h.ts_ns, h.dur_ns, h.inv, h.hid, h.depth, &rec, {}, {}};
  }
};

// Records [first_seq, last_seq] of ring owner (pid, tid) were not written; pid = tid = 0 for
// records lost outside any ring (no_ring, vfork), whose sequence numbers are 0.
struct DropsEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t dropped = 0;
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  DropReason reason = DropReason::kRingFull;
};

// A span open when its owner died. Like SpanEvent, one spelling of its name: `raw_name` and
// `name_cut` (the drainer, the binary reader) or `spelled_name` (the text reader; never empty
// there, as the line spells a missing name `%3F`).
struct UnfinishedEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t inv = 0;
  uint32_t depth = 0;      // nesting depth of the open span
  uint64_t ts_ns = 0;      // its start
  std::string_view raw_name;      // up to kOpenNameBytes raw bytes (what the ring kept)
  bool name_cut = false;          // the raw name went on past raw_name
  std::string_view spelled_name;  // encoded as on the [SPANRING_UNFINISHED] line
};

// Open spans deeper than kOpenSpanMax when their owner died, which the ring could not describe.
struct UndescribedEvent {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t count = 0;
};

}  // namespace spanring
