// One entry point for the readers that only look at a trace (`spanring convert --to chrome`,
// `spanring report`): a spanring binary trace (format/binary_reader.h) or [STRACE] text
// (format/text_reader.h), told apart by the binary magic. Either way the events are those of
// format/event.h; EventSpelling (format/event_spelling.h) gives their names and attributes in
// one spelling whichever format they came from.
#pragma once

#include "format/convert_io.h"
#include "format/event_visitor.h"

namespace spanring {

// Reads `in` whichever format it is in. Empty input is an empty [STRACE] trace (a text drainer
// with nothing to write leaves an empty file); a binary file cut inside its magic is a cut
// binary trace, not "not a trace". Errors as the reader's.
ReadResult read_trace(TraceInput& in, EventVisitor& visitor);

}  // namespace spanring
