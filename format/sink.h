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
#include "format/tsc_clock.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

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

  // ---- runs of ring records (binary version 3). A sink whose runs() is true takes a thread's
  // well-framed span records as the ring holds them, copied by the drainer in one piece,
  // instead of one span() per record: string() once per string id a file uses, before the
  // first run naming it, then begin_run()/end_run() around the copied slots. The defaults are
  // for a sink without runs (the drainer then calls span() for every record).

  // Whether the drainer may write runs through this sink.
  virtual bool runs() const noexcept { return false; }
  // Defines string `id` as `bytes` (1..kStringMaxBytes raw bytes, checked by the drainer) at
  // `out` (room for kMaxStringEventBytes); returns the bytes written (0: kept elsewhere, as the
  // flight recorder keeps them in its metadata).
  virtual size_t string(char* /*out*/, uint32_t /*id*/, std::string_view /*bytes*/) noexcept {
    return 0;
  }
  // The bytes begin_run() writes in front of a run's slots.
  virtual size_t run_header_bytes() const noexcept { return 0; }
  // A run of owner (pid, tid) starting at sequence number first_seq begins at `out`: the
  // drainer copies the slots right after run_header_bytes() and then calls end_run() with the
  // same `out`, the slot count (1..kMaxRunSlots) and the record count, once the slots are
  // checked (and, unless clock_events(), their TSC times converted). Returns the header bytes.
  // `anchor` is the owner's clock anchor (its process' attach pair), which a sink with
  // clock_events() keeps in the run for the reader's conversion of TSC times.
  virtual size_t begin_run(char* /*out*/, uint32_t /*pid*/, uint32_t /*tid*/,
                           uint64_t /*first_seq*/, TscClock::Pair /*anchor*/) noexcept {
    return 0;
  }
  virtual void end_run(char* /*out*/, uint32_t /*slots*/, uint32_t /*records*/) noexcept {}
  // Binary version 4: runs keep their records' TSC times, and the reader converts them with the
  // drainer's clock samples, which the drainer writes through clock() before the first run that
  // follows their sampling (docs/binary-format.md, event 9). False: the drainer converts TSC
  // times in its copy of a run (version 3, and the flight recorder, whose snapshot windows do
  // not start where the clock's history does).
  virtual bool clock_events() const noexcept { return false; }
  // Writes `n` clock samples (at most kMaxClockSamplesPerEvent) at `out` (room for
  // clock_event_bytes(n)): `reset` replaces the reader's samples, else they are added to them.
  virtual size_t clock(char* /*out*/, bool /*reset*/, const TscClock::Pair* /*samples*/,
                       uint32_t /*n*/) noexcept {
    return 0;
  }
  static constexpr size_t clock_event_bytes(uint32_t n) noexcept {
    return 4 + 8 + size_t{n} * 16;  // EventHeader, ClockBody, n ClockSamples
  }
  // A sink that also wants each record of a run as the text drainer reads it (the tee, which
  // writes [STRACE] text beside the runs): the drainer then reads every record of the run from
  // the ring once more, record by record as the text path does, and calls run_record() for
  // each (after begin_run, before end_run). Costs a second read: for checking, not production.
  virtual bool wants_run_records() const noexcept { return false; }
  virtual void run_record(const SpanEvent& /*e*/) noexcept {}
  // ... or, for a record rewritten in the ring since the run's copy was checked, this drop.
  virtual void run_record_drop(const DropsEvent& /*e*/) noexcept {}
};

}  // namespace spanring
