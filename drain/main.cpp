// spanring: the CLI. Parses the arguments with CLI11 and dispatches to the commands:
//   spanring run [-o FILE] [--format strace|binary] [--rings N] [--ring-records N]
//                [--max-size SIZE | --rotate SIZE[:COUNT]] -- CMD [ARGS...]
//   spanring drain --segment NAME -o FILE [--format strace|binary]     (drain/commands.h)
//                  [--max-size SIZE | --rotate SIZE[:COUNT]]
//   spanring clean [-n]
//   spanring convert FILE --to strace|chrome [-o OUT]                   (tools/convert.h)
//   spanring report FILE [--json] [-o OUT]
#include "drain/commands.h"
#include "tools/convert.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

// --max-size SIZE and --rotate SIZE[:COUNT] of `run` and `drain` (drain/output_files.h). SIZE
// takes CLI11's size suffixes (K, M, G, ... as powers of 1024, or KB/KiB...).
void add_limit_options(CLI::App* cmd, spanring::OutputLimits& limits, std::string& rotate) {
  cmd->add_option("--max-size", limits.max_size,
                  "Stop writing when the trace file would pass SIZE bytes (K/M/G suffixes, at "
                  "least 64K); later records are drained, counted (reason max_size) and not "
                  "written, and the file's last line says how many")
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--rotate", rotate,
                  "Start a new file before the current one passes SIZE bytes and keep the newest "
                  "COUNT (default 4): FILE is the current one, FILE.1 the one before, ...; each "
                  "file reads alone")
      ->type_name("SIZE[:COUNT]");
}

// Fills limits.rotate_* from --rotate's text; throws spanring::Error on a bad value.
void parse_rotate(const std::string& rotate, spanring::OutputLimits& limits) {
  if (rotate.empty()) return;
  const size_t colon = rotate.find(':');
  std::string size = rotate.substr(0, colon);
  std::string bad;
  try {
    bad = CLI::AsSizeValue(false)(size);  // rewrites `size` as bytes
  } catch (const CLI::Error& e) {  // an unknown unit is thrown, not returned
    bad = e.what();
  }
  if (!bad.empty() || size.empty() || size[0] == '-' ||
      size.find_first_not_of("0123456789") != std::string::npos)
    throw spanring::Error(spanring::ErrorCode::kInvalidArgument,
                          "--rotate " + rotate + ": SIZE must be a size such as 64M: " + bad,
                          EINVAL, "");
  const spanring::OutputLimits r = spanring::rotate_limits(
      std::stoull(size), colon == std::string::npos ? "" : rotate.substr(colon + 1));
  limits.rotate_size = r.rotate_size;
  limits.rotate_count = r.rotate_count;
  spanring::check_limits(limits);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spanring: drain a shared-memory span trace into a [STRACE] text or binary file, "
               "convert and report traces"};
  app.require_subcommand(1);

  std::string out_path;
  spanring::SegmentOptions opts;
  std::vector<std::string> cmd;
  CLI::App* run = app.add_subcommand(
      "run", "Create a segment, run CMD with SPANRING_SEGMENT set, drain until CMD and all its "
             "descendants exit; exits with CMD's status");
  run->add_option("-o,--output", out_path,
                  "Trace file (default: spanring-<pid>.strace, or .sptrace for binary)");
  std::string run_format = "strace";
  std::string run_also;
  run->add_option("--format", run_format,
                  "Output format: strace ([STRACE] text) or binary (fastest; docs/binary-format.md, "
                  "read it with `spanring convert` and `spanring report`)")
      ->check(CLI::IsMember({"strace", "binary"}))
      ->capture_default_str();
  spanring::TracingPolicy run_policy;
  run->add_flag("--fail-on-loss", run_policy.fail_on_loss,
                "Exit 3 when CMD exited 0 but records were dropped or could not be written");
  run->add_flag("--require-tracing", run_policy.require_tracing,
                "Exit 2 before starting CMD when it cannot be traced as asked (no segment can be "
                "created, io_uring is unavailable), instead of running it untraced or writing "
                "with write(2)");
  run->add_option("--also-strace", run_also,
                  "Also write the same events as [STRACE] text to this file (to check "
                  "conversions; costs a second formatting pass)");
  run->add_option("--rings", opts.ring_count,
                  "Rings in the segment = threads that can trace at once (all processes)")
      ->check(CLI::Range(1u, spanring::kMaxRingCount))
      ->capture_default_str();
  run->add_option("--ring-records", opts.ring_capacity,
                  "Ring capacity in 64-byte record slots (a span takes 1-5), rounded up to a "
                  "power of two")
      ->check(CLI::Range(spanring::kMinRingCapacity, spanring::kMaxRingCapacity))
      ->capture_default_str();
  std::string run_rotate;
  add_limit_options(run, run_policy.limits, run_rotate);
  run->add_option("cmd", cmd, "The command to trace (after --)")->required();

  std::string segment_name;
  std::string drain_out;
  CLI::App* drain = app.add_subcommand(
      "drain", "Attach to an existing segment and drain it until SIGINT/SIGTERM, then drain "
               "what is left, flush and exit 0");
  drain->add_option("--segment", segment_name, "Segment name (the value of SPANRING_SEGMENT)")
      ->required();
  drain->add_option("-o,--output", drain_out, "Trace file")->required();
  std::string drain_format;
  std::string drain_also;
  drain->add_option("--format", drain_format,
                    "Output format: strace or binary (default: the format of the part of the "
                    "file a killed drainer committed, else strace)")
      ->check(CLI::IsMember({"strace", "binary"}));
  spanring::TracingPolicy drain_policy;
  drain->add_flag("--fail-on-loss", drain_policy.fail_on_loss,
                  "Exit 3 when records were dropped or could not be written");
  drain->add_flag("--require-tracing", drain_policy.require_tracing,
                  "Exit 2, moving no ring tail, when io_uring is unavailable, instead of writing "
                  "with write(2)");
  drain->add_option("--also-strace", drain_also,
                    "Also write this drainer's events as [STRACE] text to this file");
  std::string drain_rotate;
  add_limit_options(drain, drain_policy.limits, drain_rotate);

  std::string convert_in;
  std::string convert_to;
  std::string convert_out;
  CLI::App* convert = app.add_subcommand(
      "convert", "Convert a trace: a binary trace to [STRACE] text (byte-identical to "
                 "--format strace), or any trace to Chrome/Perfetto trace JSON");
  convert->add_option("file", convert_in, "Trace file (- = stdin)")->required();
  convert->add_option("--to", convert_to, "strace or chrome")
      ->required()
      ->check(CLI::IsMember({"strace", "chrome"}));
  convert->add_option("-o,--output", convert_out, "Output file (default: stdout)");

  std::string report_in;
  std::string report_out;
  bool report_json = false;
  CLI::App* report = app.add_subcommand(
      "report", "Per span name count/total/mean/p50/p99/max, per process and thread records, "
                "drops and unfinished spans of a trace (binary or [STRACE] text)");
  report->add_option("file", report_in, "Trace file (- = stdin)")->required();
  report->add_flag("--json", report_json, "JSON instead of tables");
  report->add_option("-o,--output", report_out, "Output file (default: stdout)");

  bool dry_run = false;
  CLI::App* clean = app.add_subcommand(
      "clean", "Remove spanring segments in /dev/shm whose creator, drainer and ring owners "
               "are all dead; never a live one");
  clean->add_flag("-n,--dry-run", dry_run, "Only say what would be removed");

  CLI11_PARSE(app, argc, argv);

  try {
    if (*run) {
      parse_rotate(run_rotate, run_policy.limits);
      return spanring::cmd_run(out_path, run_format, run_also, opts, cmd, run_policy);
    }
    if (*clean) return spanring::cmd_clean(dry_run);
    if (*convert)
      return spanring::cmd_convert(convert_in,
                                   convert_to == "chrome" ? spanring::ConvertTo::kChrome
                                                          : spanring::ConvertTo::kStrace,
                                   convert_out);
    if (*report) return spanring::cmd_report(report_in, report_json, report_out);
    parse_rotate(drain_rotate, drain_policy.limits);
    spanring::check_limits(drain_policy.limits);
    return spanring::cmd_drain(segment_name, drain_out, drain_format, drain_also, drain_policy);
  } catch (const spanring::Error& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return 2;
  }
}
