#include "tools/convert.h"

#include "format/binary_reader.h"
#include "format/text_sink.h"
#include "format/trace_reader.h"
#include "tools/chrome_json.h"
#include "tools/cli_util.h"
#include "tools/progress_bar.h"
#include "tools/report.h"

#include <cstdio>

namespace spanring {
namespace {

// Binary events through TextSink, the text drainer's formatter: byte-identical by construction.
class StraceWriter final : public EventVisitor {
 public:
  explicit StraceWriter(TraceOutput& out) : out_(out) {}
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

 private:
  TraceOutput& out_;
  TextSink sink_;
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

int cmd_convert(const std::string& in_path, ConvertTo to, const std::string& out_path,
                bool force) {
  TraceInput in = TraceInput::open(in_path);
  show_progress(in);
  OutputFile out(out_path, force);
  const ReadResult r = convert_trace(in, out.out(), to);
  const std::string what = to == ConvertTo::kStrace ? "[STRACE] text" : "Chrome JSON";
  for (const std::string& n : r.notes) std::fprintf(stderr, "spanring: note: %s\n", n.c_str());
  switch (r.status) {
    case ReadResult::Status::kComplete:
    case ReadResult::Status::kCut: {
      const std::string old = out.commit();
      if (!old.empty())
        std::fprintf(stderr, "spanring: kept the existing %s as %s\n", out_path.c_str(),
                     old.c_str());
      if (r.status == ReadResult::Status::kCut)
        std::fprintf(stderr, "spanring: %s: %s; the %s output holds everything before the cut\n",
                     in.name().c_str(), r.message.c_str(), what.c_str());
      return kExitOk;
    }
    case ReadResult::Status::kCorrupt:
      // A rejected input leaves no output file (and an existing one as it was). Through stdout
      // the events before the bad block have been written already: that is how to salvage them.
      out.discard();
      {
        const std::string before = std::to_string(r.events) + " event(s) before it";
        const std::string where =
            out_path.empty() || is_stdout_path(out_path)
                ? "the " + what + " on stdout holds the " + before +
                      (to == ConvertTo::kChrome ? " (and is valid JSON)" : "")
                : "no output written (-o - writes the " + before + " to stdout)";
        std::fprintf(stderr, "spanring: %s is corrupt: %s; %s\n", in.name().c_str(),
                     r.message.c_str(), where.c_str());
      }
      return kExitFailed;
    case ReadResult::Status::kNotATrace:
      out.discard();
      std::fprintf(stderr, "spanring: %s is not a trace: %s\n", in.name().c_str(),
                   r.message.c_str());
      return kExitFailed;
  }
  return kExitFailed;
}

int cmd_report(const std::string& in_path, bool json, const std::string& out_path, bool force) {
  TraceInput in = TraceInput::open(in_path);
  OutputFile out(out_path, force);
  std::string err;
  const int rc = run_report(in, out.out(), json, &err);
  if (!err.empty()) std::fprintf(stderr, "spanring: %s\n", err.c_str());
  if (rc != kExitOk) {
    out.discard();
    return rc;
  }
  const std::string old = out.commit();
  if (!old.empty())
    std::fprintf(stderr, "spanring: kept the existing %s as %s\n", out_path.c_str(),
                 old.c_str());
  return rc;
}

}  // namespace spanring
