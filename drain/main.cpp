// spanring: the CLI. Parses the arguments with CLI11 and dispatches to the commands:
//   spanring run [-o FILE] [--format strace|binary] [--rings N] [--ring-records N]
//                [--max-size SIZE | --rotate SIZE[:COUNT]] -- CMD [ARGS...]
//   spanring drain --segment NAME -o FILE [--format strace|binary]     (drain/commands.h)
//                  [--max-size SIZE | --rotate SIZE[:COUNT]]
//   spanring run --flight-recorder SIZE [--snapshot-at-exit] [-o BASE] -- CMD [ARGS...]
//   spanring snapshot --segment NAME [-o FILE]
//   spanring clean [-n]
//   spanring stat --segment NAME [--json]                              (drain/stat.h)
//   spanring convert FILE --to strace|chrome [-o OUT]                   (tools/convert.h)
//   spanring report FILE [--json] [-o OUT]
//   spanring export FILE... --clickhouse URL [--follow] [--host-id NAME] ...  (tools/export.h)
// One block per subcommand. The conventions every command follows (exit statuses, `-o -`,
// FILE.old unless --force, no output for a rejected input) are in tools/cli_util.h; what a
// command line that does not parse gets (exit 2, the usage, "did you mean") in drain/usage.h.
// A new option or command also goes into docs/spanring.1.scd, the man page (tests/test_mp_cli.cpp
// checks that it names every option of every command's --help); the bash completion
// (docs/spanring.bash) reads them from --help by itself.
#include "drain/commands.h"
#include "drain/stat.h"
#include "drain/usage.h"
#include "tools/cli_util.h"
#include "tools/convert.h"
#ifdef SPANRING_CLICKHOUSE
#include "tools/export.h"
#endif

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
               "convert and report traces", "spanring"};
  app.require_subcommand(1);
  // SPANRING_VERSION: the Meson project version (drain/meson.build).
  app.set_version_flag("--version", std::string("spanring ") + SPANRING_VERSION,
                       "Print the version and exit");
  constexpr const char* kForceHelp =
      "Overwrite an existing output file (default: keep it as FILE.old)";

  std::string out_path;
  spanring::SegmentOptions opts;
  std::vector<std::string> cmd;
  spanring::TracingPolicy run_policy;
  CLI::App* run = app.add_subcommand(
      "run", "Create a segment, run CMD with SPANRING_SEGMENT set, drain until CMD and all its "
             "descendants exit; exits with CMD's status");
  run->add_option("-o,--output", out_path,
                  "Trace file, - for stdout (CMD's own stdout then goes to stderr; default: "
                  "spanring-<pid>.strace, or .sptrace for binary)");
  run->add_flag("--force", run_policy.force, kForceHelp);
  std::string run_format = "strace";
  std::string run_also;
  run->add_option("--format", run_format,
                  "Output format: strace ([STRACE] text) or binary (fastest; docs/binary-format.md, "
                  "read it with `spanring convert` and `spanring report`)")
      ->check(CLI::IsMember({"strace", "binary"}))
      ->capture_default_str();
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
  std::string run_rotate;
  add_limit_options(run, run_policy.limits, run_rotate);
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
  spanring::TracingPolicy drain_policy;
  drain->add_option("-o,--output", drain_out,
                    "Trace file, - for stdout; the file a killed drainer of this segment "
                    "left is resumed")
      ->required();
  drain->add_flag("--force", drain_policy.force, kForceHelp);
  std::string drain_format;
  std::string drain_also;
  drain->add_option("--format", drain_format,
                    "Output format: strace or binary (default: the format of the part of the "
                    "file a killed drainer committed, else strace)")
      ->check(CLI::IsMember({"strace", "binary"}));
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
  convert->add_option("-o,--output", convert_out, "Output file, - for stdout (the default)");
  bool convert_force = false;
  convert->add_flag("--force", convert_force, kForceHelp);

  std::string report_in;
  std::string report_out;
  bool report_json = false;
  CLI::App* report = app.add_subcommand(
      "report", "Per span name count/total/mean/p50/p99/max, per process and thread records, "
                "drops and unfinished spans of a trace (binary or [STRACE] text)");
  report->add_option("file", report_in, "Trace file (- = stdin)")->required();
  report->add_flag("--json", report_json, "JSON instead of tables");
  report->add_option("-o,--output", report_out, "Output file, - for stdout (the default)");
  bool report_force = false;
  report->add_flag("--force", report_force, kForceHelp);

#ifdef SPANRING_CLICKHOUSE
  // `spanring export` (tools/export.h, docs/clickhouse.md); built only with libcurl.
  spanring::ExportOptions export_opts;
  double export_retry_s = 30, export_flush_s = 1, export_timeout_s = 30;
  CLI::App* export_cmd = app.add_subcommand(
      "export", "Send traces (binary or [STRACE] text) into ClickHouse over HTTP; --follow "
                "ships a binary trace while a drainer writes it (docs/clickhouse.md)");
  export_cmd->add_option("file", export_opts.files, "Trace files (--follow: one binary trace)");
  export_cmd->add_option("--clickhouse", export_opts.url,
                         "ClickHouse HTTP interface, e.g. http://127.0.0.1:8123")
      ->required();
  export_cmd->add_option("--host-id", export_opts.host, "The rows' host (default: hostname)");
  export_cmd->add_option("--session", export_opts.session,
                         "The rows' session (default: a hash of each file's first bytes, so "
                         "the same file always gets the same session)");
  export_cmd->add_option("--database", export_opts.database, "ClickHouse database")
      ->capture_default_str();
  export_cmd->add_flag("--create-schema", export_opts.create_schema,
                       "Create the tables (IF NOT EXISTS; every export does it first anyway); "
                       "with no file, only that");
  export_cmd->add_option("--cluster", export_opts.cluster,
                         "Also create Distributed <table>_all tables over this cluster of the "
                         "servers' remote_servers");
  export_cmd->add_flag("--follow", export_opts.follow,
                       "Follow a binary trace being written: ship each complete block, keep "
                       "the position in a state file, until --while-pid exits or SIGINT/SIGTERM");
  export_cmd->add_option("--while-pid", export_opts.while_pid,
                         "--follow: stop once this process (the `spanring run`) has exited and "
                         "the file is read to its end")
      ->check(CLI::PositiveNumber);
  export_cmd->add_option("--state", export_opts.state,
                         "--follow: state file (default: FILE.export-state)");
  export_cmd->add_option("--batch-bytes", export_opts.batch_bytes,
                         "Rows per batch, in RowBinary bytes (bounds the exporter's memory)")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 30))
      ->capture_default_str();
  export_cmd->add_option("--retry-for", export_retry_s,
                         "Seconds of failed attempts before a batch is given up (--follow: "
                         "counted once the workload has ended)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  export_cmd->add_option("--flush-every", export_flush_s,
                         "--follow: seconds after which a partial batch is sent")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  export_cmd->add_option("--timeout", export_timeout_s, "Seconds for one HTTP request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
#endif

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return spanring::usage_error(app, e, argc, argv);
  }

  try {
    if (*run) {
      parse_rotate(run_rotate, run_policy.limits);
      if (flight_opt->count() != 0 && run_policy.limits.file_limit() != 0)
        throw spanring::Error(spanring::ErrorCode::kInvalidArgument,
                              "--flight-recorder keeps its window in memory and writes only "
                              "snapshots: --max-size and --rotate do not apply to it",
                              EINVAL, "");
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
                                   convert_out, convert_force);
    if (*report) return spanring::cmd_report(report_in, report_json, report_out, report_force);
#ifdef SPANRING_CLICKHOUSE
    if (*export_cmd) {
      if (export_opts.files.empty() && !export_opts.create_schema) {
        std::fprintf(stderr, "spanring export: give trace files, or --create-schema\n");
        return 2;
      }
      const auto ms = [](double s) {
        return std::chrono::milliseconds(static_cast<long>(s * 1000));
      };
      export_opts.retry_for = ms(export_retry_s);
      export_opts.flush_every = ms(export_flush_s);
      export_opts.timeout = ms(export_timeout_s);
      return spanring::cmd_export(export_opts);
    }
#endif
    parse_rotate(drain_rotate, drain_policy.limits);
    spanring::check_limits(drain_policy.limits);
    return spanring::cmd_drain(segment_name, drain_out, drain_format, drain_also, drain_policy);
  } catch (const spanring::Error& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return spanring::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return spanring::kExitUsage;
  }
}
