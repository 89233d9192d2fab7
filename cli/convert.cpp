// `spanring convert`: a binary trace to [STRACE] text, or any trace to Chrome/Perfetto trace JSON
// (tools/convert.h).
#include "cli/commands.h"
#include "cli/options.h"
#include "tools/cli_util.h"
#include "tools/convert.h"
#include "tools/progress_bar.h"

#include <cstdio>
#include <memory>
#include <string>

namespace spanring {
namespace {

// Converts `in_path` ("-": stdin) into `out_path` ("-" or "": stdout; an existing file is kept as
// OUT.old unless `force`: OutputFile, tools/cli_util.h), with a progress bar on stderr when
// stderr is a terminal and the input is a file of at least 64 MiB. Messages on stderr; returns
// the exit status (tools/convert.h).
int convert_file(const std::string& in_path, ConvertTo to, const std::string& out_path,
                bool force) {
  TraceInput in = TraceInput::open(in_path);
  show_progress(in);
  OutputFile out(out_path, force);
  const ReadResult r = convert_trace(in, out.out(), to);
  const std::string what = to == ConvertTo::kStrace ? "[STRACE] text" : "Chrome JSON";
  for (const std::string& n : r.notes) std::fprintf(stderr, "spanring: note: %s\n", n.c_str());
  if (r.holds_nothing()) {
    out.discard();
    std::fprintf(stderr, "spanring: %s holds no trace: %s\n", in.name().c_str(),
                 r.message.c_str());
    return kExitFailed;
  }
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


struct ConvertOptions {
  std::string in_path;
  std::string to;
  std::string out_path;
  bool force = false;
};

}  // namespace

Command add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* convert = app.add_subcommand(
      "convert", "Convert a trace: a binary trace to [STRACE] text (byte-identical to "
                 "--format strace), or any trace to Chrome/Perfetto trace JSON");
  convert->add_option("file", o->in_path, "Trace file (- = stdin)")->required();
  convert->add_option("--to", o->to, "strace or chrome")
      ->required()
      ->check(CLI::IsMember({"strace", "chrome"}));
  convert->add_option("-o,--output", o->out_path, "Output file, - for stdout (the default)");
  convert->add_flag("--force", o->force, kForceHelp);
  return {convert, [o] {
            return convert_file(o->in_path,
                                o->to == "chrome" ? ConvertTo::kChrome : ConvertTo::kStrace,
                                o->out_path, o->force);
          }};
}

}  // namespace spanring
