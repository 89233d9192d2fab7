#include "tools/convert.h"

#include "format/binary_format.h"
#include "tools/chrome_json.h"
#include "format/trace_reader.h"
#include "tools/report.h"
#include "format/strace_format.h"

#include <spanring/segment.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <cstdio>

namespace spanring {
namespace {

// Binary events through TextSink, the text drainer's formatter: byte-identical by construction.
class StraceWriter final : public BinaryVisitor {
 public:
  explicit StraceWriter(TraceOutput& out) : out_(out) {}
  void process(uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
               std::string_view cmdline) override {
    out_.commit(sink_.process(out_.room(kMaxLineBytes), pid, tid, mono_ns, wall_ns, cmdline));
  }
  void thread(uint32_t pid, uint32_t tid, std::string_view name) override {
    out_.commit(sink_.thread(out_.room(kMaxLineBytes), pid, tid, name));
  }
  void span(uint32_t pid, uint32_t tid, const RecordCopy& rec) override {
    out_.commit(sink_.span(out_.room(kMaxLineBytes), pid, tid, rec));
  }
  void drops(uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq, uint64_t last_seq,
             DropReason reason) override {
    out_.commit(sink_.drops(out_.room(kMaxLineBytes), pid, tid, dropped, first_seq, last_seq,
                            reason));
  }
  void unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                  std::string_view name, bool name_cut, uint64_t ts_ns) override {
    out_.commit(sink_.unfinished(out_.room(kMaxLineBytes), pid, tid, inv, depth, name, name_cut,
                                 ts_ns));
  }
  void undescribed(uint32_t pid, uint32_t tid, uint32_t count) override {
    out_.commit(sink_.undescribed(out_.room(kMaxLineBytes), pid, tid, count));
  }

 private:
  TraceOutput& out_;
  TextSink sink_;
};

// Inputs at least this large get a progress bar (when stderr is a terminal): smaller ones
// convert in well under a second.
constexpr uint64_t kProgressMinBytes = 64u << 20;

void install_progress(TraceInput& in) {
  if (!::isatty(STDERR_FILENO) || !in.size() || *in.size() < kProgressMinBytes) return;
  const uint64_t total = *in.size();
  struct State {
    std::chrono::steady_clock::time_point last{};
    bool done = false;
  };
  auto st = std::make_shared<State>();
  const std::string name = in.name();
  in.on_progress([total, st, name](uint64_t at) {
    if (st->done) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - st->last < std::chrono::milliseconds(200) && at < total) return;
    st->last = now;
    if (at >= total) {
      st->done = true;
      std::fprintf(stderr, "\r\033[K");  // the bar goes away once the input is read
      return;
    }
    const int pct = static_cast<int>(at * 100 / total);
    const int filled = pct * 30 / 100;
    std::fprintf(stderr, "\r\033[Kspanring: %s [%.*s%*s] %3d%% (%llu of %llu MiB)", name.c_str(),
                 filled, "==============================", 30 - filled, "", pct,
                 static_cast<unsigned long long>(at >> 20),
                 static_cast<unsigned long long>(total >> 20));
  });
}

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
  install_progress(in);
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
