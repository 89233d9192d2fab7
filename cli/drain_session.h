// What `spanring run` and `spanring drain` share once they have a segment and an output: the
// operator's tracing policy, the drain loop (polling with back-off, owner checks, the status
// line), the sink choice, and the summary they print at the end.
//
// Main thread of the CLI only. Messages go to stderr.
#pragma once

#include "cli/status_line.h"
#include "drain/diagnostics.h"
#include "drain/drainer.h"
#include "drain/poll_pacer.h"
#include "drain/output_files.h"
#include "drain/tee_sink.h"
#include "drain/uring_writer.h"
#include "format/binary_sink.h"
#include "format/text_sink.h"

#include <spanring/segment.h>

#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spanring {

// What the operator asks of tracing itself and of its output file, for `run` and `drain`.
struct TracingPolicy {
  // Fail (exit 2 before the command starts, or before any tail moves) rather than run the
  // command untraced when no segment can be created, or write with write(2) when io_uring is
  // unavailable.
  bool require_tracing = false;
  // Exit kLossExitStatus when records were dropped or could not be written (and, for `run`,
  // the command itself exited 0): a job that must not lose trace data can tell.
  bool fail_on_loss = false;
  // The live status line on a terminal (cli/status_line.h); --no-status turns it off.
  bool status_line = true;
  // Overwrite an existing output file; without it a regular, non-empty one is kept as FILE.old
  // (keep_existing, tools/cli_util.h). `drain` never moves the file this segment's killed
  // drainer wrote: it resumes that one.
  bool force = false;
  // Bounds on the output (--max-size, --rotate; drain/output_files.h). Records kept out of a
  // full file are a loss (reason max_size) like any drop.
  OutputLimits limits;
};
// The exit status of --fail-on-loss: 3 (1 is a failed write, 2 a usage or setup error).
inline constexpr int kLossExitStatus = 3;

// The writer's fallback for a policy: write(2) when io_uring is missing, unless tracing is
// required.
UringWriter::Fallback fallback_for(bool require_tracing);

// `path` as the user reads it in messages: absolute, or "stdout" for "-".
std::string absolute(const std::string& path);

// A fresh segment name for `spanring run`: spanring-<pid>-<8 hex digits>, the form `spanring
// clean` recognises an unfinished creation by (drain/unfinished_segment.h).
std::string unique_segment_name();

// Creates segment `name` for `run`. When it cannot be created: rethrows when
// `require_tracing`, else says on stderr that `cmd` runs untraced and what is lost
// (`lost_what`: "no trace is written") and returns nullopt.
std::optional<Segment> create_segment_or_say(const std::string& name, const SegmentOptions& opts,
                                             bool require_tracing,
                                             const std::vector<std::string>& cmd,
                                             const char* lost_what);

// One line when the output goes through the synchronous fallback writer (UringWriter).
void say_fallback(const UringWriter& writer);

// Whether `path` is the file the segment was last drained into (same device and inode, as
// recover() decides what to keep).
bool is_segment_output(const Segment& segment, const std::string& path);

// The output options a restarted drainer needs to write on the same way (" --max-size N" or
// " --rotate SIZE:COUNT", in bytes).
std::string limit_options(const OutputLimits& l);

// The drainer's sink: the output format, seen through a TeeSink when --also-strace asks for a
// [STRACE] copy of the same events in a second file.
struct SinkChoice {
  TextSink text;
  std::optional<BinarySink> binary;
  std::unique_ptr<UringWriter> also_writer;
  std::optional<TeeSink> tee;

  SinkChoice(const std::string& format, const std::string& also_path, bool file_header,
             uint64_t first_block, UringWriter::Fallback fallback, uint32_t version = 0) {
    if (format == "binary") {
      binary.emplace(file_header, first_block);
      if (version != 0) binary->set_version(version);  // a kept prefix's (resume)
    }
    if (!also_path.empty()) {
      also_writer = std::make_unique<UringWriter>(also_path, 8, 0, fallback);
      tee.emplace(base(), *also_writer);
    }
  }
  Sink& base() {
    return binary ? static_cast<Sink&>(*binary) : static_cast<Sink&>(text);
  }
  Sink& sink() { return tee ? static_cast<Sink&>(*tee) : base(); }
  // After Drainer::finish(): the --also-strace file is complete and fsynced.
  bool finish() { return tee ? tee->finish() : true; }
  const char* label() const {
    return binary ? "spanring binary trace, docs/binary-format.md" : "[STRACE] text";
  }
};

// Whether /dev/shm/NAME still names the segment being drained. systemd-logind's RemoveIPC
// (and any rm) can remove the name during a run: the mapping stays valid and draining goes
// on, but processes started from then on cannot attach and neither can a restarted drainer,
// so it is said once.
class SegmentNameWatch {
 public:
  explicit SegmentNameWatch(std::string name) : name_(std::move(name)) {
    struct stat st {};
    if (::stat(path().c_str(), &st) == 0) {
      dev_ = st.st_dev;
      ino_ = st.st_ino;
    }
  }
  // Says it once (report(): a line of its own, never glued onto the status line).
  void check() {
    if (said_ || ino_ == 0) return;
    struct stat st {};
    if (::stat(path().c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) return;
    said_ = true;
    report("spanring: warning: segment %s was removed from /dev/shm (systemd-logind's "
           "RemoveIPC does this at logout): draining goes on, but processes started from "
           "now on run untraced and spanring drain --segment %s can no longer attach\n",
           name_.c_str(), name_.c_str());
  }

 private:
  std::string path() const { return "/dev/shm/" + name_; }
  std::string name_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool said_ = false;
};

// When to poll next: drain/poll_pacer.h (an eighth of the busiest ring per poll, doubling
// waits when idle, up to 1 ms while records are recent and 20 ms after; at most 2 ms after a
// poll that found records). While writes are in flight the wait is for the writer to hand a
// buffer back, so that tails advance as soon as the bytes are in the file.
//
// A partly filled buffer goes to the writer once no record came for kIdleFlush (and at the
// latest every 100 ms, busy or not), not at every poll that found nothing: a workload that
// emits in bursts a few ms apart (the demo) made one write, and woke the writer thread twice,
// per burst. Records still reach the file within the 100 ms docs/design.md promises.
inline constexpr auto kIdleFlush = std::chrono::milliseconds(5);

// With no buffer in flight the wait is Drainer::wait_for_claim: it ends early when a producer
// claims a ring (a thread's first record), so a thread that starts while the drainer sleeps
// is read warm from its start (drain/poll_pacer.h).
inline void wait_for_next_poll(Drainer& drainer, int64_t wait_us) {
  if (wait_us <= 0) return;
  if (!drainer.wait_for_write(wait_us)) drainer.wait_for_claim(wait_us);
}

// Drains until done() says stop; checks dead owners every 100 ms, busy or not (a ring whose
// owner died must be freed even while other rings keep the drainer busy), and the segment's
// name once a second and once at the end; offers the status line an update every 100 ms (it
// redraws once a second) and erases it on the way out.
template <class Done>
void drain_loop(Drainer& drainer, SegmentNameWatch& name_watch, StatusLine& status,
                Done&& done) {
  auto next_check = std::chrono::steady_clock::now();
  PollPacer pacer(drainer.ring_capacity(), next_check);
  auto last_records = next_check;  // when a poll last found records
  int checks = 0;
  while (!done()) {
    const uint64_t n = drainer.poll();
    const auto now = std::chrono::steady_clock::now();
    if (n != 0) last_records = now;
    if (now >= next_check) {
      drainer.check_owners();
      drainer.flush_partial();  // a trickle reaches the file within ~100 ms
      if (++checks % 10 == 0) name_watch.check();
      status.update(drainer.stats().written, drainer.stats().dropped);
      next_check = now + std::chrono::milliseconds(100);
    }
    const int64_t wait_us = pacer.after_poll(now, n, drainer.last_poll_peak_slots(),
                                             drainer.last_poll_saw_claim());
    if (wait_us == 0) continue;
    if (n == 0 && now - last_records >= kIdleFlush) drainer.flush_partial();
    wait_for_next_poll(drainer, wait_us);
  }
  // A removal in the run's last second is said too (the check above runs once a second).
  name_watch.check();
  status.erase();
}

// The summary of a drain on stderr: records written to `out` (`ok`: no write failed), totals,
// every kind of loss with what to do about it, and the rotated files.
void print_summary(const Drainer& d, const std::string& out, bool ok, const OutputLimits& limits);

// Whether the drainer lost records: dropped (any reason) or drained but not written.
bool lost(const Drainer& d);

// The end of a `run` (file or flight recorder), after the summary: the hint when no thread of
// the command wrote a record, then the exit status (the command's, or kLossExitStatus).
int finish_run(const Drainer& drainer, int status, const std::vector<std::string>& cmd,
               const TracingPolicy& policy);

}  // namespace spanring
