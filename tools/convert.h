// Trace conversion, what `spanring convert FILE --to strace|chrome [-o OUT]` (cli/convert.cpp)
// and the tests call.
//
//   --to strace   a binary trace as [STRACE] text, byte-identical to what the text drainer
//                 writes for the same events: every event goes through TextSink, the text
//                 drainer's own formatter (format/text_sink.h), nothing is spelled twice.
//   --to chrome   Chrome trace-event JSON for Perfetto (chrome_json.h); binary or text input.
//
// Exit statuses (tools/cli_util.h): 0 converted (also when the input was cut: the output holds
// every complete block, and stderr says what was cut), 1 the input is rejected: corrupt, not a
// trace, or empty (0 bytes; report alike); 2 usage or I/O errors. A rejected input leaves no
// output file and an existing one as it was; on stdout (-o -) the events before a corrupt block
// have been written, which is how to salvage them.
#pragma once

#include "format/convert_io.h"

#include <string>

namespace spanring {

enum class ConvertTo { kStrace, kChrome };

// Converts `in` to `out`. Returns how reading ended; kNotATrace also for an empty input and
// for text input to --to strace (it is [STRACE] already), with the reason in `message`.
ReadResult convert_trace(TraceInput& in, TraceOutput& out, ConvertTo to);


}  // namespace spanring
