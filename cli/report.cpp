// `spanring report`: per span name and per process and thread statistics of a trace
// (tools/report.h).
#include "cli/commands.h"
#include "cli/options.h"
#include "tools/cli_util.h"
#include "tools/report.h"

#include <cstdio>
#include <memory>
#include <string>

namespace spanring {
namespace {

// Reports on `in_path` ("-": stdin) into `out_path` ("-" or "": stdout; an existing file is kept
// as OUT.old unless `force`). A rejected input leaves no output. Messages on stderr; returns the
// exit status.
int report_file(const std::string& in_path, bool json, const std::string& out_path, bool force) {
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


struct ReportOptions {
  std::string in_path;
  std::string out_path;
  bool json = false;
  bool force = false;
};

}  // namespace

Command add_report_command(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* report = app.add_subcommand(
      "report", "Per span name count/total/mean/p50/p99/max, per process and thread records, "
                "drops and unfinished spans of a trace (binary or [STRACE] text)");
  report->add_option("file", o->in_path, "Trace file (- = stdin)")->required();
  report->add_flag("--json", o->json, "JSON instead of tables");
  report->add_option("-o,--output", o->out_path, "Output file, - for stdout (the default)");
  report->add_flag("--force", o->force, kForceHelp);
  return {report, [o] { return report_file(o->in_path, o->json, o->out_path, o->force); }};
}

}  // namespace spanring
