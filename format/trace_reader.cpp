#include "format/trace_reader.h"

#include "format/binary_reader.h"
#include "format/text_reader.h"

#include <string_view>

namespace spanring {

ReadResult read_trace(TraceInput& in, EventVisitor& visitor) {
  const std::string_view head = in.peek(sizeof kTraceMagic);
  // A binary file cut inside its magic (peek returns fewer bytes only at the end of the
  // input): say so rather than call it "not a trace".
  const bool cut_magic = !head.empty() && head.size() < sizeof kTraceMagic &&
                         head == std::string_view(kTraceMagic, head.size());
  if (is_binary_trace(head) || cut_magic) return read_binary_trace(in, visitor);
  return read_strace_text(in, visitor);
}

}  // namespace spanring
