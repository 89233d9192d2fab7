#include "tools/convert.h"

#include "format/binary_reader.h"
#include "format/text_sink.h"
#include "format/trace_reader.h"
#include "tools/chrome_json.h"
#include "tools/cli_util.h"

#include <cstdio>

namespace spanring {
namespace {

// Binary events through TextSink, the text drainer's formatter: byte-identical by construction.
class StraceWriter final : public EventVisitor {
 public:
  explicit StraceWriter(TraceOutput& out) : out_(out), lines_{sink_, out_} {}
  void process(const ProcessEvent& e) override {
    out_.commit(sink_.process(out_.room(kMaxLineBytes), e));
  }
  void thread(const ThreadEvent& e) override {
    out_.commit(sink_.thread(out_.room(kMaxLineBytes), e));
  }
  void span(const SpanEvent& e) override { out_.commit(sink_.span(out_.room(kMaxLineBytes), e)); }
  void drops(const DropsEvent& e) override {
    out_.commit(sink_.drops(out_.room(kMaxLineBytes), e));
  }
  void unfinished(const UnfinishedEvent& e) override {
    out_.commit(sink_.unfinished(out_.room(kMaxLineBytes), e));
  }
  void undescribed(const UndescribedEvent& e) override {
    out_.commit(sink_.undescribed(out_.room(kMaxLineBytes), e));
  }
  // The records of binary runs go straight into out_ through sink_ (the text drainer's direct
  // line; same bytes as span()).
  TextLines* text_lines() override { return &lines_; }

 private:
  TraceOutput& out_;
  TextSink sink_;
  TextLines lines_;
};

}  // namespace

ReadResult convert_trace(TraceInput& in, TraceOutput& out, ConvertTo to) {
  if (is_empty_input(in)) {
    ReadResult r;
    r.status = ReadResult::Status::kNotATrace;
    r.message = "it is empty (0 bytes)";
    return r;
  }
  if (to == ConvertTo::kStrace) {
    if (!is_binary_trace(in.peek(sizeof kTraceMagic))) {
      const std::string_view head = in.peek(sizeof kTraceMagic);
      // A binary file cut inside its magic is still a (cut) binary trace.
      if (head.empty() || head != std::string_view(kTraceMagic, head.size())) {
        ReadResult r;
        r.status = ReadResult::Status::kNotATrace;
        r.message = "--to strace converts spanring binary traces, and this input does not "
                    "start with the binary magic (it starts with \"" +
                    printable_prefix(head, 8) + "\"; [STRACE] text needs no conversion)";
        return r;
      }
    }
    StraceWriter w(out);
    return read_binary_trace(in, w);
  }
  ChromeTraceWriter w(out, in.name());
  const ReadResult r = read_trace(in, w);
  w.finish(r);
  return r;
}

}  // namespace spanring
