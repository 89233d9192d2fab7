// `spanring drain`: attaches to an existing segment and drains it until SIGINT/SIGTERM, then
// drains what is left, flushes and exits. Resumes the file a killed drainer of the segment left.
#include "cli/child_process.h"
#include "cli/commands.h"
#include "cli/drain_session.h"
#include "cli/options.h"
#include "drain/drainer_lock.h"
#include "drain/resume.h"
#include "tools/cli_util.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>

namespace spanring {
namespace {

// Attaches to segment `segment_name` and drains into `out_path` ("-": stdout) until
// SIGINT/SIGTERM, then drains what is left. Resumes a file a killed drainer left (the file the
// segment says it was drained into, by device and inode): keeps its committed part and
// follows its format (`format` empty: that format, else strace; a different one throws
// Error kInvalidArgument). Without io_uring it writes with write(2) (one stderr line), unless
// policy.require_tracing, which throws Error kUnsupported before any tail moves. Returns 0, 1
// when a write failed, or kLossExitStatus when records were lost and policy.fail_on_loss.
int drain_segment(const std::string& segment_name, const std::string& out_path, std::string format,
              const std::string& also_path, const TracingPolicy& policy) {
  const bool require_tracing = policy.require_tracing;
  // First: a SIGTERM while we open the segment and recover the file must not kill us between
  // recovery steps; it is seen by the drain loop, which then drains once and stops.
  install_stop_handlers();
  ignore_sigpipe();
  refuse_snapshot_signal();
  Segment segment = Segment::open(segment_name);
  DrainerLock lock(segment);
  // A drainer killed before us may have left a commit half done and a tail of uncommitted
  // bytes in the file: finish the commit and keep only the committed bytes.
  const uint64_t keep = recover(segment, out_path);
  // A kept prefix decides the format (no --format: follow it); a file is never half text,
  // half binary.
  if (keep != 0) {
    const std::string kept = kept_format(out_path);
    if (format.empty()) format = kept;
    if (format != kept)
      throw Error(ErrorCode::kInvalidArgument,
                "cannot resume " + absolute(out_path) + " as " + format +
                    ": its committed part is " + kept + "; resume with --format " + kept +
                    " or write another file",
                EINVAL, out_path);
  }
  if (format.empty()) format = "strace";
  // Any other existing file is kept as FILE.old, as `run` does; never the one being resumed,
  // nor the one this segment's killed drainer wrote with nothing committed yet (its bytes are
  // all uncommitted, and its records are still in the rings: it is simply started again).
  if (keep == 0 && !is_segment_output(segment, out_path)) {
    const std::string old = keep_existing(out_path, policy.force);
    if (!old.empty())
      std::fprintf(stderr, "spanring: kept the existing %s as %s\n", out_path.c_str(),
                   old.c_str());
  }
  // The processes already announced in the kept part (one anchor / process event per pid per
  // file) and, for binary, the next block number.
  KeptPrefix prefix = format == "binary" && keep != 0 ? scan_binary_prefix(out_path, keep)
                                                       : scan_text_prefix(out_path, keep);
  if (policy.limits.rotating() && !also_path.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "--rotate and --also-strace do not go together (the text copy is one file)",
                EINVAL, also_path);
  OutputFiles output(writer_path(out_path), keep, fallback_for(require_tracing), policy.limits);
  SinkChoice choice(format, also_path, keep == 0, prefix.next_block_seq,
                    fallback_for(require_tracing), prefix.version);
  say_fallback(output.writer());
  if (keep != 0)
    std::fprintf(stderr, "spanring: resuming %s after its last commit at byte %llu\n",
                 absolute(out_path).c_str(), static_cast<unsigned long long>(keep));
  Drainer drainer(segment, output, choice.sink(), prefix.pids);
  SegmentNameWatch name_watch(segment_name);
  StatusLine status_line(StatusLine::wanted(policy.status_line));
  DiagnosticsScope diagnostics(status_line);  // the drainer's messages erase the line first
  drain_loop(drainer, name_watch, status_line, [] { return stop_signal() != 0; });
  bool ok = drainer.finish(false);
  ok = choice.finish() && ok;
  print_summary(drainer, absolute(out_path), ok, policy.limits);
  if (!ok) return 1;
  return policy.fail_on_loss && lost(drainer) ? kLossExitStatus : 0;
}


struct DrainOptions {
  std::string segment;
  std::string out_path;
  std::string format;
  std::string also_path;
  std::string rotate;
  TracingPolicy policy;
};

}  // namespace

Command add_drain_command(CLI::App& app) {
  auto o = std::make_shared<DrainOptions>();
  CLI::App* drain = app.add_subcommand(
      "drain", "Attach to an existing segment and drain it until SIGINT/SIGTERM, then drain "
               "what is left, flush and exit 0");
  drain->add_option("--segment", o->segment, "Segment name (the value of SPANRING_SEGMENT)")
      ->required();
  drain->add_option("-o,--output", o->out_path,
                    "Trace file, - for stdout; the file a killed drainer of this segment "
                    "left is resumed")
      ->required();
  drain->add_flag("--force", o->policy.force, kForceHelp);
  drain->add_option("--format", o->format,
                    "Output format: strace or binary (default: the format of the part of the "
                    "file a killed drainer committed, else strace)")
      ->check(CLI::IsMember({"strace", "binary"}));
  drain->add_flag("--fail-on-loss", o->policy.fail_on_loss,
                  "Exit 3 when records were dropped or could not be written");
  drain->add_flag("--require-tracing", o->policy.require_tracing,
                  "Exit 2, moving no ring tail, when io_uring is unavailable, instead of writing "
                  "with write(2)");
  drain->add_flag("--no-status", [o](int64_t) { o->policy.status_line = false; },
                  kNoStatusHelp);
  drain->add_option("--also-strace", o->also_path,
                    "Also write this drainer's events as [STRACE] text to this file");
  add_limit_options(drain, o->policy.limits, o->rotate);
  return {drain, [o] {
            parse_limits(o->rotate, o->policy.limits);
            return drain_segment(o->segment, o->out_path, o->format, o->also_path, o->policy);
          }};
}

}  // namespace spanring
