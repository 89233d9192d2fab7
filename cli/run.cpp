// `spanring run`: creates a segment, starts the command with SPANRING_SEGMENT naming it, and
// drains until the command and every descendant exit, into a file or, with --flight-recorder,
// into a window in memory that is written only as snapshots (drain/flight_recorder.h).
#include "cli/child_process.h"
#include "cli/commands.h"
#include "cli/drain_session.h"
#include "cli/options.h"
#include "drain/drainer_lock.h"
#include "drain/flight_recorder.h"
#include "drain/snapshot_control.h"
#include "tools/cli_util.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spanring {
namespace {

// `spanring run --flight-recorder SIZE`: keep the newest `bytes` of the binary trace in memory
// and write snapshots only (0 = off: write the trace file).
struct FlightOptions {
  uint64_t bytes = 0;
  // Also take a snapshot when the command exits normally (it always gets one when a signal
  // kills it).
  bool snapshot_at_exit = false;
};

// `spanring run --flight-recorder SIZE`: cmd_run's flow with the trace kept in a FlightRecorder
// instead of a file, and snapshots taken when asked for (drain/flight_recorder.h).
int run_flight(const std::string& out_path, const std::string& format,
               const std::string& also_path, const SegmentOptions& opts,
               const std::vector<std::string>& cmd, const TracingPolicy& policy,
               const FlightOptions& flight) {
  if (format != "binary")
    throw Error(ErrorCode::kInvalidArgument,
                "--flight-recorder keeps and snapshots the binary trace: use --format binary "
                "(or leave --format out)",
                EINVAL, "");
  if (!also_path.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "--also-strace writes every record to a file, which --flight-recorder exists "
                "not to do; convert a snapshot instead (spanring convert SNAPSHOT --to strace)",
                EINVAL, also_path);
  // Snapshots are <base>.snap-<n>.sptrace.
  std::string base = out_path.empty() ? "spanring-" + std::to_string(::getpid()) : out_path;
  static constexpr std::string_view kExt = ".sptrace";
  if (base.size() > kExt.size() && base.compare(base.size() - kExt.size(), kExt.size(), kExt) == 0)
    base.resize(base.size() - kExt.size());
  base = absolute(base);
  if (policy.require_tracing) {
    // Snapshots are written when asked for; an io_uring that is missing must be known now.
    UringWriter probe("/dev/null", 1, 0, UringWriter::Fallback::kRequired);
  } else {
    UringWriter probe("/dev/null", 1, 0, UringWriter::Fallback::kSynchronous);
    if (probe.synchronous())
      std::fprintf(stderr, "spanring: io_uring is unavailable (%s): snapshots will be written "
                   "with write(2) instead, same output (--require-tracing makes this an error)\n",
                   probe.fallback_cause().c_str());
  }
  FlightRecorder recorder(flight.bytes, fallback_for(policy.require_tracing));
  FlightSink sink(recorder);
  const std::string name = unique_segment_name();
  std::optional<Segment> created = create_segment_or_say(
      name, opts, policy.require_tracing, cmd, "no snapshot can be taken");
  if (!created) return run_untraced(cmd);
  Segment& segment = *created;
  DrainerLock lock(segment);
  SnapshotListener listener(name);
  install_snapshot_handler();
  std::fprintf(stderr, "spanring: segment %s (%u rings of %u slots); flight recorder: the "
               "newest %llu bytes of the trace stay in memory, nothing is written until a "
               "snapshot: kill -USR1 %d, or spanring snapshot --segment %s [-o FILE] (default "
               "%s.snap-N.sptrace)\n",
               name.c_str(), segment.ring_count(), segment.ring_capacity(),
               static_cast<unsigned long long>(flight.bytes), static_cast<int>(::getpid()),
               name.c_str(), base.c_str());

  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  install_stop_handlers();
  ignore_sigpipe();
  // The name's inode is taken before the command starts: a removal the moment its first
  // ring is claimed (before the drainer below is built) is then still seen as one.
  SegmentNameWatch name_watch(name);
  const pid_t child = start_command(cmd, name);
  if (child == 0) {
    Segment::remove(name);
    return 127;
  }

  Drainer drainer(segment, recorder, sink);
  uint64_t asked = 0;
  auto ask = [&](std::string path, const std::string& reason, int reply_fd) {
    ++asked;
    if (path.empty()) path = base + ".snap-" + std::to_string(asked) + ".sptrace";
    recorder.request(SnapshotRequest{std::move(path), reason, reply_fd});
  };
  std::vector<SnapshotRequest> requests;
  auto listen = [&] {
    requests.clear();
    listener.poll(requests);
    for (SnapshotRequest& r : requests) ask(std::move(r.path), r.reason, r.reply_fd);
  };
  int signals_seen = 0;
  auto next_listen = std::chrono::steady_clock::now();
  StatusLine status_line(StatusLine::wanted(policy.status_line));
  DiagnosticsScope diagnostics(status_line);  // the drainer's messages erase the line first
  int status = 0;
  bool child_done = false;
  bool all_done = false;
  drain_loop(drainer, name_watch, status_line, [&] {
    if (reap_descendants(child, status, child_done, all_done) && WIFSIGNALED(status)) {
      // The command crashed (or was killed): its rings' owners are dead; report what they
      // left open, then snapshot the window that ends with it.
      drainer.poll_all();
      drainer.check_owners();
      drainer.poll_all();
      ask("", "command killed by signal " + std::to_string(WTERMSIG(status)), -1);
    }
    const int signals = snapshot_signals();
    for (; signals_seen != signals; ++signals_seen) ask("", "SIGUSR1", -1);
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_listen) {
      listen();
      next_listen = now + std::chrono::milliseconds(100);
    }
    if (recorder.pending()) {
      // The newest records first: what the rings hold now goes into the window.
      drainer.poll_all();
      drainer.flush_partial();
      recorder.start_next();
    }
    recorder.pump();
    return child_done && all_done;
  });
  const bool ok = drainer.finish(true);
  if (WIFEXITED(status) && flight.snapshot_at_exit) ask("", "command exited", -1);
  listen();
  // Every snapshot asked for is written before the run ends.
  while (recorder.busy()) {
    if (recorder.pending()) recorder.start_next();
    recorder.pump(100000);
  }
  Segment::remove(name);
  std::fprintf(stderr, "spanring: flight recorder: %llu snapshot(s) written (see above)\n",
               static_cast<unsigned long long>(recorder.snapshots_written()));
  print_summary(drainer, "the flight recorder's memory (only snapshots are written)", ok,
                OutputLimits{});
  return finish_run(drainer, status, cmd, policy);
}


// Undoes what opening the output did when no trace will be written after all (the segment
// could not be created): the empty file goes, and a file it replaced (kept as `old`, FILE.old)
// comes back. Only a regular file that is still empty is touched: never stdout, a device, a
// pipe or anything already written.
void discard_unused_output(const std::string& out_path, const std::string& old) {
  if (is_stdout_path(out_path)) return;
  struct stat st {};
  if (::lstat(out_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0) return;
  if (!old.empty() && ::rename(old.c_str(), out_path.c_str()) == 0) return;
  ::unlink(out_path.c_str());
}

// Runs `cmd` traced into `out_path` (empty: spanring-<pid>.strace, or .sptrace for binary; "-":
// stdout, and `cmd`'s own stdout then goes to spanring's stderr so that it cannot mix into the
// trace) in `format` ("strace" or "binary"), plus [STRACE] text into `also_path` when not
// empty, until `cmd` and all its descendants exit. Returns `cmd`'s exit status (128 + signal
// when killed, 127 when it cannot be started). The workload is never stopped for the tracer's
// sake: without io_uring the output is written with write(2) (same bytes), and when the segment
// cannot be created (no room in /dev/shm, say) `cmd` runs untraced; one stderr line says which.
// policy.require_tracing makes either an Error thrown before `cmd` starts; policy.fail_on_loss
// turns a loss into kLossExitStatus when `cmd` exited 0.
//
// With flight.bytes != 0 (format must be "binary", no `also_path`): nothing is written until a
// snapshot is asked for: SIGUSR1, `spanring snapshot`, `cmd` killed by a signal, or its exit
// with flight.snapshot_at_exit. Snapshots are named <base>.snap-<n>.sptrace, where <base> is
// `out_path` without a trailing .sptrace (default spanring-<pid>) and n counts from 1.
int run_traced(std::string out_path, const std::string& format, const std::string& also_path,
            const SegmentOptions& opts, const std::vector<std::string>& cmd,
            const TracingPolicy& policy, const FlightOptions& flight) {
  if (flight.bytes != 0) return run_flight(out_path, format, also_path, opts, cmd, policy, flight);
  const bool require_tracing = policy.require_tracing;
  if (out_path.empty())
    out_path = "spanring-" + std::to_string(::getpid()) +
               (format == "binary" ? ".sptrace" : ".strace");
  if (policy.limits.rotating() && !also_path.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "--rotate and --also-strace do not go together (the text copy is one file)",
                EINVAL, also_path);
  // The output first: a file that cannot be opened stops everything, before the command.
  // Without io_uring the writer falls back to write(2) unless tracing is required.
  const std::string old = keep_existing(out_path, policy.force);
  OutputFiles output(writer_path(out_path), 0, fallback_for(require_tracing), policy.limits);
  SinkChoice choice(format, also_path, true, 0, fallback_for(require_tracing));
  say_fallback(output.writer());
  const std::string name = unique_segment_name();
  std::optional<Segment> created;
  try {
    created = create_segment_or_say(name, opts, require_tracing, cmd, "no trace is written");
  } catch (...) {
    discard_unused_output(out_path, old);
    throw;
  }
  if (!created) {
    discard_unused_output(out_path, old);
    return run_untraced(cmd);
  }
  if (!old.empty())  // said once it is for good: an untraced run puts the file back
    std::fprintf(stderr, "spanring: kept the existing %s as %s\n", out_path.c_str(), old.c_str());
  Segment& segment = *created;
  refuse_snapshot_signal();  // before the segment line tells anyone our pid
  DrainerLock lock(segment);
  if (is_stdout_path(out_path))
    std::fprintf(stderr, "spanring: segment %s (%u rings of %u slots); the trace goes to stdout, "
                 "where a killed drainer cannot be resumed\n",
                 name.c_str(), segment.ring_count(), segment.ring_capacity());
  else
    std::fprintf(stderr, "spanring: segment %s (%u rings of %u slots); restart a killed "
                 "drainer with: spanring drain --segment %s -o %s%s%s\n",
                 name.c_str(), segment.ring_count(), segment.ring_capacity(), name.c_str(),
                 absolute(out_path).c_str(), format == "binary" ? " --format binary" : "",
                 limit_options(policy.limits).c_str());

  // Orphaned descendants (daemons, double forks) are re-parented to us, so we can wait for
  // every process that may still write into the segment.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  install_stop_handlers();
  ignore_sigpipe();

  // The name's inode is taken before the command starts: a removal the moment its first
  // ring is claimed (before the drainer below is built) is then still seen as one.
  SegmentNameWatch name_watch(name);
  const pid_t child = start_command(cmd, name, is_stdout_path(out_path));
  if (child == 0) {
    Segment::remove(name);
    return 127;
  }

  Drainer drainer(segment, output, choice.sink());
  StatusLine status_line(StatusLine::wanted(policy.status_line));
  DiagnosticsScope diagnostics(status_line);  // the drainer's messages erase the line first
  int status = 0;
  bool child_done = false;
  bool all_done = false;
  drain_loop(drainer, name_watch, status_line, [&] {
    // Stop once the command and every descendant are gone.
    reap_descendants(child, status, child_done, all_done);
    return child_done && all_done;
  });
  bool ok = drainer.finish(true);
  ok = choice.finish() && ok;
  Segment::remove(name);
  std::fprintf(stderr, "spanring: trace: %s (%s)\n", absolute(out_path).c_str(), choice.label());
  print_summary(drainer, absolute(out_path), ok, policy.limits);
  return finish_run(drainer, status, cmd, policy);
}

struct RunOptions {
  std::string out_path;
  std::string format = "strace";
  std::string also_path;
  std::string rotate;
  SegmentOptions segment;
  std::vector<std::string> cmd;
  TracingPolicy policy;
  FlightOptions flight;
};

}  // namespace

Command add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand(
      "run", "Create a segment, run CMD with SPANRING_SEGMENT set, drain until CMD and all its "
             "descendants exit; exits with CMD's status");
  run->add_option("-o,--output", o->out_path,
                  "Trace file, - for stdout (CMD's own stdout then goes to stderr; default: "
                  "spanring-<pid>.strace, or .sptrace for binary)");
  run->add_flag("--force", o->policy.force, kForceHelp);
  run->add_option("--format", o->format,
                  "Output format: strace ([STRACE] text) or binary (fastest; docs/binary-format.md, "
                  "read it with `spanring convert` and `spanring report`)")
      ->check(CLI::IsMember({"strace", "binary"}))
      ->capture_default_str();
  run->add_flag("--fail-on-loss", o->policy.fail_on_loss,
                "Exit 3 when CMD exited 0 but records were dropped or could not be written");
  run->add_flag("--require-tracing", o->policy.require_tracing,
                "Exit 2 before starting CMD when it cannot be traced as asked (no segment can be "
                "created, io_uring is unavailable), instead of running it untraced or writing "
                "with write(2)");
  run->add_flag("--no-status", [o](int64_t) { o->policy.status_line = false; }, kNoStatusHelp);
  CLI::Option* flight_opt =
      run->add_option("--flight-recorder", o->flight.bytes,
                      "Flight recorder: keep only the newest SIZE bytes of the (binary) trace in "
                      "memory and write nothing until a snapshot is asked for (SIGUSR1, "
                      "`spanring snapshot`, CMD killed by a signal); SIZE takes K/M/G suffixes "
                      "(powers of 1024), 1M..64G")
          ->transform(CLI::AsSizeValue(false));
  run->add_flag("--snapshot-at-exit", o->flight.snapshot_at_exit,
                "With --flight-recorder: also take a snapshot when CMD exits normally")
      ->needs(flight_opt);
  run->add_option("--also-strace", o->also_path,
                  "Also write the same events as [STRACE] text to this file (to check "
                  "conversions; costs a second formatting pass)");
  run->add_option("--rings", o->segment.ring_count,
                  "Rings in the segment = threads that can trace at once (all processes)")
      ->check(CLI::Range(1u, kMaxRingCount))
      ->capture_default_str();
  run->add_option("--ring-records", o->segment.ring_capacity,
                  "Ring capacity in 64-byte record slots (a span takes 1-5), rounded up to a "
                  "power of two")
      ->check(CLI::Range(kMinRingCapacity, kMaxRingCapacity))
      ->capture_default_str();
  add_limit_options(run, o->policy.limits, o->rotate);
  run->add_option("cmd", o->cmd, "The command to trace (after --)")->required();
  return {run, [o, run, flight_opt] {
            const bool flight = flight_opt->count() != 0;
            parse_limits(o->rotate, o->policy.limits);
            if (flight && o->policy.limits.file_limit() != 0)
              throw Error(ErrorCode::kInvalidArgument,
                          "--flight-recorder keeps its window in memory and writes only "
                          "snapshots: --max-size and --rotate do not apply to it",
                          EINVAL, "");
            // A flight recorder keeps the binary trace; --format binary is implied.
            if (flight && run->count("--format") == 0) o->format = "binary";
            if (flight && o->flight.bytes == 0)
              throw Error(ErrorCode::kInvalidArgument, "--flight-recorder needs a size (1M..64G)",
                          EINVAL, "");
            return run_traced(o->out_path, o->format, o->also_path, o->segment, o->cmd,
                              o->policy, o->flight);
          }};
}

}  // namespace spanring
