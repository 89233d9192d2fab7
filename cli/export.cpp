// `spanring export`: traces into ClickHouse over its HTTP interface (tools/export.h,
// docs/clickhouse.md). Built only with libcurl.
#include "cli/child_process.h"
#include "cli/commands.h"

#include "tools/export.h"

#include <chrono>
#include <cstdio>
#include <memory>

namespace spanring {
namespace {

// The options given in seconds, turned into ExportOptions' durations once parsed.
struct ExportCommandOptions {
  ExportOptions o;
  double retry_s = 30;
  double flush_s = 1;
  double timeout_s = 30;
};

}  // namespace

Command add_export_command(CLI::App& app) {
  auto e = std::make_shared<ExportCommandOptions>();
  ExportOptions& o = e->o;
  CLI::App* cmd = app.add_subcommand(
      "export", "Send traces (binary or [STRACE] text) into ClickHouse over HTTP; --follow "
                "ships a binary trace while a drainer writes it (docs/clickhouse.md)");
  cmd->add_option("file", o.files, "Trace files (--follow: one binary trace)");
  cmd->add_option("--clickhouse", o.url, "ClickHouse HTTP interface, e.g. http://127.0.0.1:8123")
      ->required();
  cmd->add_option("--host-id", o.host, "The rows' host (default: hostname)");
  cmd->add_option("--session", o.session,
                  "The rows' session (default: a hash of each file's first bytes, so "
                  "the same file always gets the same session)");
  cmd->add_option("--database", o.database, "ClickHouse database")->capture_default_str();
  cmd->add_flag("--create-schema", o.create_schema,
                "Create the tables (IF NOT EXISTS; every export does it first anyway); "
                "with no file, only that");
  cmd->add_option("--cluster", o.cluster,
                  "Also create Distributed <table>_all tables over this cluster of the "
                  "servers' remote_servers");
  cmd->add_flag("--follow", o.follow,
                "Follow a binary trace being written: ship each complete block, keep "
                "the position in a state file, until --while-pid exits or SIGINT/SIGTERM");
  cmd->add_option("--while-pid", o.while_pid,
                  "--follow: stop once this process (the `spanring run`) has exited and "
                  "the file is read to its end")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--state", o.state, "--follow: state file (default: FILE.export-state)");
  cmd->add_option("--batch-bytes", o.batch_bytes,
                  "Rows per batch, in RowBinary bytes (bounds the exporter's memory)")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--retry-for", e->retry_s,
                  "Seconds of failed attempts before a batch is given up (--follow: "
                  "counted once the workload has ended)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--flush-every", e->flush_s,
                  "--follow: seconds after which a partial batch is sent")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--timeout", e->timeout_s, "Seconds for one HTTP request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  return {cmd, [e] {
            ExportOptions& o = e->o;
            if (o.files.empty() && !o.create_schema) {
              std::fprintf(stderr, "spanring export: give trace files, or --create-schema\n");
              return 2;
            }
            const auto ms = [](double s) {
              return std::chrono::milliseconds(static_cast<long>(s * 1000));
            };
            o.retry_for = ms(e->retry_s);
            o.flush_every = ms(e->flush_s);
            o.timeout = ms(e->timeout_s);
            install_stop_handlers();
            o.stop_requested = [] { return stop_signal() != 0; };
            return export_traces(o);
          }};
}

}  // namespace spanring
