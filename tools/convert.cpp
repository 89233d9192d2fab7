#include "tools/convert.h"

#include "format/binary_reader.h"
#include "format/text_sink.h"
#include "format/trace_reader.h"
#include "tools/chrome_json.h"
#include "tools/progress_bar.h"
#include "tools/report.h"

#include <sys/stat.h>
#include <unistd.h>

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

int cmd_convert(const std::string& in_path, ConvertTo to, const std::string& out_path) {
  TraceInput in = TraceInput::open(in_path);
  show_progress(in);
  TraceOutput out = TraceOutput::open(out_path);
  const ReadResult r = convert_trace(in, out, to);
  out.finish();
  const std::string what = to == ConvertTo::kStrace ? "[STRACE] text" : "Chrome JSON";
  switch (r.status) {
    case ReadResult::Status::kComplete:
      for (const std::string& n : r.notes) std::fprintf(stderr, "spanring: note: %s\n", n.c_str());
      return 0;
    case ReadResult::Status::kCut:
      for (const std::string& n : r.notes) std::fprintf(stderr, "spanring: note: %s\n", n.c_str());
      std::fprintf(stderr, "spanring: %s: %s; the %s output holds everything before the cut\n",
                   in.name().c_str(), r.message.c_str(), what.c_str());
      return 0;
    case ReadResult::Status::kCorrupt:
      std::fprintf(stderr, "spanring: %s is corrupt: %s; the %s output holds the %llu event(s) "
                   "before it%s\n",
                   in.name().c_str(), r.message.c_str(), what.c_str(),
                   static_cast<unsigned long long>(r.events),
                   to == ConvertTo::kChrome ? " (and is valid JSON)" : "");
      return 1;
    case ReadResult::Status::kNotATrace:
      std::fprintf(stderr, "spanring: %s is not a trace: %s\n", in.name().c_str(),
                   r.message.c_str());
      // Leave no empty output file behind for an input that was not a trace (only a regular,
      // empty file: never a device such as /dev/null).
      if (!out_path.empty() && out_path != "-") {
        struct stat st {};
        if (::stat(out_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
          ::unlink(out_path.c_str());
      }
      return 1;
  }
  return 1;
}

int cmd_report(const std::string& in_path, bool json, const std::string& out_path) {
  TraceInput in = TraceInput::open(in_path);
  TraceOutput out = TraceOutput::open(out_path);
  std::string err;
  const int rc = run_report(in, out, json, &err);
  out.finish();
  if (!err.empty()) std::fprintf(stderr, "spanring: %s\n", err.c_str());
  return rc;
}

}  // namespace spanring
