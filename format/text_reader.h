// Reading [STRACE] text back into events (format/event.h). Written from the spec
// (shared/strace-format.md) and docs/output.md; it shares no code with the test suite's parser,
// so that each can check the other. Cold path, one thread; the input is untrusted.
#pragma once

#include "format/convert_io.h"
#include "format/event_visitor.h"

namespace spanring {

// [STRACE] text, parsed strictly: a line holding `[STRACE]` must be a well-formed record per
// shared/strace-format.md, `[CLOCK_ANCHOR]` a well-formed anchor line, and spanring's
// `[SPANRING_DROPS]`/`[SPANRING_UNFINISHED]` lines well formed per docs/output.md; the first
// line that is not gives kCorrupt with its line number and byte offset. Lines with none of these
// tokens are skipped and counted in a note (other log lines of the runtime). Input with bytes
// but no trace line is kNotATrace. A last line without LF is kCut (ignored).
//
// Events carry the encoded spelling as it stands on the line (SpanEvent::name and attrs with
// no record, UnfinishedEvent::spelled_name); a process event has tid 0 and no command line,
// and text has no thread events. A second anchor of a pid is a note, not an event. Only
// TraceInput's read errors and the visitor's exceptions propagate.
ReadResult read_strace_text(TraceInput& in, EventVisitor& visitor);

}  // namespace spanring
