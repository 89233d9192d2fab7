// What a trace reader delivers to: the events of format/event.h, in file order. Both readers
// (read_binary_trace, format/binary_reader.h; read_strace_text, format/text_reader.h) and
// read_trace (format/trace_reader.h, either) call one method per event; a visitor overrides
// what it needs (every method has an empty default).
//
// Called on the reader's thread; a visitor may throw, which ends the read. The events borrow
// the reader's memory: copy what must outlive the call.
#pragma once

#include "format/event.h"

namespace spanring {

class TextSink;
class TraceOutput;

// Where a visitor writes [STRACE] lines itself (`spanring convert --to strace`): the binary
// reader formats the records of a run (binary event 8: records in ring layout) straight from the
// run's bytes into `out` through `sink` (TextSink::span_plain / span_compact, the text drainer's
// direct line), without building a SpanEvent, whenever they are copied as they are; any other
// record still reaches span(). The lines are the bytes span() would have written through the
// same sink (its owner state is shared), in the same order. Both outlive the read.
struct TextLines {
  TextSink& sink;
  TraceOutput& out;
};

class EventVisitor {
 public:
  virtual ~EventVisitor() = default;
  virtual void process(const ProcessEvent& /*e*/) {}
  virtual void thread(const ThreadEvent& /*e*/) {}
  virtual void span(const SpanEvent& /*e*/) {}
  virtual void drops(const DropsEvent& /*e*/) {}
  virtual void unfinished(const UnfinishedEvent& /*e*/) {}
  virtual void undescribed(const UndescribedEvent& /*e*/) {}
  // The visitor's text lines, when it writes [STRACE] text through one TextSink into one
  // TraceOutput (asked once per run; nullptr: every record is delivered as a SpanEvent).
  virtual TextLines* text_lines() { return nullptr; }
};

}  // namespace spanring
