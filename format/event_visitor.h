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

class EventVisitor {
 public:
  virtual ~EventVisitor() = default;
  virtual void process(const ProcessEvent& /*e*/) {}
  virtual void thread(const ThreadEvent& /*e*/) {}
  virtual void span(const SpanEvent& /*e*/) {}
  virtual void drops(const DropsEvent& /*e*/) {}
  virtual void unfinished(const UnfinishedEvent& /*e*/) {}
  virtual void undescribed(const UndescribedEvent& /*e*/) {}
};

}  // namespace spanring
