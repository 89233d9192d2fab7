// spanring: the CLI. Parses the arguments with CLI11 and dispatches to the commands:
//   spanring run [-o FILE] [--format strace|binary] [--rings N] [--ring-records N] -- CMD [ARGS...]
//   spanring run --flight-recorder SIZE [--snapshot-at-exit] [-o BASE] -- CMD [ARGS...]
//   spanring drain --segment NAME -o FILE [--format strace|binary]     (drain/commands.h)
//   spanring snapshot --segment NAME [-o FILE]
//   spanring clean [-n]
//   spanring stat --segment NAME [--json]                              (drain/stat.h)
//   spanring convert FILE --to strace|chrome [-o OUT]                   (tools/convert.h)
//   spanring report FILE [--json] [-o OUT]
#include "drain/commands.h"
#include "drain/stat.h"
#include "tools/convert.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

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
  run->add_flag("--no-status", [&run_policy](int64_t) { run_policy.status_line = false; },
                "No live status line (records/s, drops) on stderr; it is shown only when "
                "stderr is a terminal, and SPANRING_NO_STATUS=1 turns it off too");
  spanring::FlightOptions flight;
  CLI::Option* flight_opt =
      run->add_option("--flight-recorder", flight.bytes,
                      "Flight recorder: keep only the newest SIZE bytes of the (binary) trace in "
                      "memory and write nothing until a snapshot is asked for (SIGUSR1, "
                      "`spanring snapshot`, CMD killed by a signal); SIZE takes K/M/G suffixes "
                      "(powers of 1024), 1M..64G")
          ->transform(CLI::AsSizeValue(false));
  run->add_flag("--snapshot-at-exit", flight.snapshot_at_exit,
                "With --flight-recorder: also take a snapshot when CMD exits normally")
      ->needs(flight_opt);
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
  run->add_option("cmd", cmd, "The command to trace (after --)")->required();

  std::string snapshot_segment;
  std::string snapshot_out;
  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "Ask the flight recorder (spanring run --flight-recorder) of a segment for a "
                  "snapshot of its window, wait until it is written and print its path; exits 1 "
                  "when the segment has no flight-recording drainer");
  snapshot
      ->add_option("--segment", snapshot_segment, "Segment name (the value of SPANRING_SEGMENT)")
      ->required();
  snapshot->add_option("-o,--output", snapshot_out,
                       "Snapshot file (default: the recorder's <base>.snap-<n>.sptrace)");

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
  drain->add_flag("--no-status", [&drain_policy](int64_t) { drain_policy.status_line = false; },
                  "No live status line (records/s, drops) on stderr; it is shown only when "
                  "stderr is a terminal, and SPANRING_NO_STATUS=1 turns it off too");
  drain->add_option("--also-strace", drain_also,
                    "Also write this drainer's events as [STRACE] text to this file");

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

  std::string stat_segment;
  bool stat_json = false;
  CLI::App* stat = app.add_subcommand(
      "stat", "Show the live state of a segment (while a run drains it, or left behind): "
              "creator, drainer, rings in use with their owner, fill and drops; reads only");
  stat->add_option("--segment", stat_segment, "Segment name (the value of SPANRING_SEGMENT)")
      ->required();
  stat->add_flag("--json", stat_json, "One JSON object instead of text");

  CLI11_PARSE(app, argc, argv);

  try {
    if (*run) {
      // A flight recorder keeps the binary trace; --format binary is implied.
      if (flight_opt->count() != 0 && run->count("--format") == 0) run_format = "binary";
      if (flight_opt->count() != 0 && flight.bytes == 0)
        throw spanring::Error(spanring::ErrorCode::kInvalidArgument,
                              "--flight-recorder needs a size (1M..64G)", EINVAL, "");
      return spanring::cmd_run(out_path, run_format, run_also, opts, cmd, run_policy, flight);
    }
    if (*snapshot) return spanring::cmd_snapshot(snapshot_segment, snapshot_out);
    if (*clean) return spanring::cmd_clean(dry_run);
    if (*stat) return spanring::cmd_stat(stat_segment, stat_json);
    if (*convert)
      return spanring::cmd_convert(convert_in,
                                   convert_to == "chrome" ? spanring::ConvertTo::kChrome
                                                          : spanring::ConvertTo::kStrace,
                                   convert_out);
    if (*report) return spanring::cmd_report(report_in, report_json, report_out);
    return spanring::cmd_drain(segment_name, drain_out, drain_format, drain_also, drain_policy);
  } catch (const spanring::Error& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return 2;
  }
}
