#include "drain/commands.h"

#include "drain/drainer.h"
#include "drain/flight_recorder.h"
#include "drain/resume.h"
#include "drain/snapshot_control.h"
#include "drain/status_line.h"
#include "drain/tee_sink.h"
#include "drain/uring_writer.h"
#include "format/binary_sink.h"
#include "format/text_sink.h"
#include "src/proc.h"
#include "tools/cli_util.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <thread>

extern char** environ;

namespace spanring {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
volatile pid_t g_child = 0;

void on_stop_signal(int sig) {
  g_stop_signal = sig;
  // `run` forwards SIGINT/SIGTERM to the traced command and keeps draining until it exits.
  if (g_child > 0) ::kill(g_child, sig);
}

// SIGUSR1 asks a flight-recording `spanring run` for a snapshot (counted, so none is lost when
// several arrive between two looks).
volatile sig_atomic_t g_snapshot_signals = 0;

void on_snapshot_signal(int) { g_snapshot_signals = g_snapshot_signals + 1; }

void install_snapshot_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_snapshot_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

// A drainer that writes a file has no window to snapshot: SIGUSR1 (whose default action would
// end it, and tracing with it) is refused with one line. write(2): async-signal-safe.
void on_snapshot_signal_refused(int) {
  static constexpr char kMsg[] =
      "spanring: SIGUSR1 ignored: this drainer writes its trace to a file and keeps no snapshot "
      "window (spanring run --flight-recorder SIZE does)\n";
  const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)n;
}

void refuse_snapshot_signal() {
  struct sigaction sa {};
  sa.sa_handler = on_snapshot_signal_refused;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// Idle back-off: busy while there is work, then waits doubling from 50 us to 10 ms, so an idle
// drainer wakes ~100 times a second (well under 1% of a core) and a burst waits at most 10 ms
// to be seen (a default ring holds thousands of records, far more than 10 ms of a busy
// thread's spans at the rates that matter). While writes are in flight the wait is for the
// writer to hand a buffer back, so that tails advance as soon as the bytes are in the file.
//
// A poll that found only a trickle (fewer than kBatchRecords) waits too, up to kTrickleMaxUs: a
// drainer that comes straight back finds one or two records each time, burns a core the traced
// program may need (bench_l3 saw ~4 us of drainer CPU per record that way) and keeps pulling
// the producers' head lines to itself. A poll that finds a batch goes straight on. A rate
// that fills a quarter ring per kTrickleMaxUs finds >= kBatchRecords on the next poll.
constexpr uint64_t kBatchRecords = 64;
constexpr int64_t kTrickleMaxUs = 500;
constexpr int64_t kIdleMaxUs = 10000;
// A partly filled buffer goes to the writer once no record came for kIdleFlush (and at the
// latest every 100 ms, busy or not), not at every poll that found nothing: a workload that
// emits in bursts a few ms apart (the demo) made one write, and woke the writer thread twice,
// per burst. Records still reach the file within the 100 ms docs/design.md promises.
constexpr auto kIdleFlush = std::chrono::milliseconds(5);

class Backoff {
 public:
  void reset() noexcept { wait_us_ = 0; }
  void idle(Drainer& drainer, int64_t max_us) {
    wait_us_ = wait_us_ == 0 ? 50 : std::min<int64_t>(wait_us_ * 2, max_us);
    if (!drainer.wait_for_write(wait_us_))
      std::this_thread::sleep_for(std::chrono::microseconds(wait_us_));
  }

 private:
  int64_t wait_us_ = 0;
};

std::string unique_segment_name() {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "spanring-%d-%08x", static_cast<int>(::getpid()), rd());
  return buf;
}

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
  // `status`: the live status line, erased first so that the warning gets a line of its own.
  void check(StatusLine& status) {
    if (said_ || ino_ == 0) return;
    struct stat st {};
    if (::stat(path().c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) return;
    said_ = true;
    status.erase();
    std::fprintf(stderr, "spanring: warning: segment %s was removed from /dev/shm (systemd-logind's "
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

// Drains until done() says stop; checks dead owners every 100 ms, busy or not (a ring whose
// owner died must be freed even while other rings keep the drainer busy), and the segment's
// name once a second; offers the status line an update every 100 ms (it redraws once a
// second) and erases it on the way out.
template <class Done>
void drain_loop(Drainer& drainer, SegmentNameWatch& name_watch, StatusLine& status,
                Done&& done) {
  Backoff backoff;
  auto next_check = std::chrono::steady_clock::now();
  auto last_records = next_check;  // when a poll last found records
  int checks = 0;
  while (!done()) {
    const uint64_t n = drainer.poll();
    const auto now = std::chrono::steady_clock::now();
    if (n != 0) last_records = now;
    if (now >= next_check) {
      drainer.check_owners();
      drainer.flush_partial();  // a trickle reaches the file within ~100 ms
      if (++checks % 10 == 0) name_watch.check(status);
      status.update(drainer.stats().written, drainer.stats().dropped);
      next_check = now + std::chrono::milliseconds(100);
    }
    if (n >= kBatchRecords) {
      backoff.reset();
      continue;
    }
    if (n == 0 && now - last_records >= kIdleFlush) drainer.flush_partial();
    backoff.idle(drainer, n == 0 ? kIdleMaxUs : kTrickleMaxUs);
  }
  status.erase();
}

void print_summary(const Drainer& d, const std::string& out, bool ok,
                   const OutputLimits& limits) {
  const auto& s = d.stats();
  std::fprintf(stderr, "spanring: wrote %llu records to %s%s\n",
               static_cast<unsigned long long>(s.written), out.c_str(),
               ok ? "" : " (some writes failed, see above)");
  std::fprintf(stderr,
               "spanring: summary: written=%llu dropped=%llu unfinished=%llu processes=%llu "
               "threads=%llu\n",
               static_cast<unsigned long long>(s.written),
               static_cast<unsigned long long>(s.dropped),
               static_cast<unsigned long long>(s.unfinished),
               static_cast<unsigned long long>(s.processes),
               static_cast<unsigned long long>(s.threads));
  if (s.unwritten != 0)
    std::fprintf(stderr, "spanring: unwritten: %llu records were drained but could not be "
                 "written to the file (see the error above)\n",
                 static_cast<unsigned long long>(s.unwritten));
  if (s.corrupt_rings != 0)
    std::fprintf(stderr, "spanring: quarantined: %llu corrupt ring(s)\n",
                 static_cast<unsigned long long>(s.corrupt_rings));
  // Every loss gets a line saying what to do about it; a run that lost nothing stays quiet.
  static constexpr struct {
    DropReason reason;
    const char* advice;
  } kAdvice[] = {
      {DropReason::kRingFull, "a thread's ring was full: raise --ring-records"},
      {DropReason::kNoRing, "every ring was taken: raise --rings"},
      {DropReason::kInvalid, "the caller passed an empty name or a negative ts, dur or depth"},
      {DropReason::kCorrupt,
       "unreadable records: in rings quarantined as corrupt, or naming a string-table entry "
       "that did not check (see the lines above)"},
      {DropReason::kVfork, "emitted by vfork children before exec"},
      {DropReason::kReentrant,
       "emitted by signal handlers that interrupted a record write on the same thread"},
      {DropReason::kMaxSize,
       "the file had reached --max-size (they were drained and counted, not written): raise "
       "--max-size, or keep the newest records with --rotate SIZE:COUNT"},
  };
  for (const auto& a : kAdvice) {
    const uint64_t n = s.dropped_by_reason[static_cast<size_t>(a.reason)];
    if (n != 0)
      std::fprintf(stderr, "spanring: warning: %llu records dropped (reason %s): %s\n",
                   static_cast<unsigned long long>(n), drop_reason_name(a.reason), a.advice);
  }
  if (s.unfinished != 0)
    std::fprintf(stderr, "spanring: warning: %llu spans were still open when their process "
                 "died ([SPANRING_UNFINISHED] lines)\n",
                 static_cast<unsigned long long>(s.unfinished));
  if (limits.rotating()) {
    const uint32_t kept = static_cast<uint32_t>(std::min<uint64_t>(s.files, limits.rotate_count));
    std::string names = out;
    if (kept > 1) names += " (newest) .. " + OutputFiles::rotated_path(out, kept - 1) + " (oldest)";
    std::fprintf(stderr, "spanring: rotated: %llu files written by this drainer, %u kept: %s\n",
                 static_cast<unsigned long long>(s.files), kept, names.c_str());
  }
}

// Whether the drainer lost records: dropped (any reason) or drained but not written.
bool lost(const Drainer& d) { return d.stats().dropped != 0 || d.stats().unwritten != 0; }

// The drainer's sink: the output format, seen through a TeeSink when --also-strace asks for a
// [STRACE] copy of the same events in a second file.
struct SinkChoice {
  TextSink text;
  std::optional<BinarySink> binary;
  std::unique_ptr<UringWriter> also_writer;
  std::optional<TeeSink> tee;

  SinkChoice(const std::string& format, const std::string& also_path, bool file_header,
             uint64_t first_block, UringWriter::Fallback fallback) {
    if (format == "binary") binary.emplace(file_header, first_block);
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

std::string absolute(const std::string& path) {
  if (is_stdout_path(path)) return shown_path(path);
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// One line when the output goes through the synchronous fallback writer (UringWriter).
void say_fallback(const UringWriter& writer) {
  if (writer.synchronous())
    std::fprintf(stderr, "spanring: io_uring is unavailable (%s): writing with write(2) instead, "
                 "same output (--require-tracing makes this an error)\n",
                 writer.fallback_cause().c_str());
}

// Whether `path` is the file the segment was last drained into (same device and inode, as
// recover() decides what to keep).
bool is_segment_output(const Segment& segment, const std::string& path) {
  const SegmentHeader& h = segment.view().header();
  struct stat st {};
  return h.output_ino != 0 && ::stat(path.c_str(), &st) == 0 && st.st_dev == h.output_dev &&
         st.st_ino == h.output_ino;
}

// The output options a restarted drainer needs to write on the same way (" --max-size N" or
// " --rotate SIZE:COUNT", in bytes).
std::string limit_options(const OutputLimits& l) {
  if (l.rotating())
    return " --rotate " + std::to_string(l.rotate_size) + ":" + std::to_string(l.rotate_count);
  if (l.max_size != 0) return " --max-size " + std::to_string(l.max_size);
  return {};
}

// Reaps every exited descendant without waiting (spanring is their subreaper). When `child`
// (the traced command) is among them: its wait status into `status`, `child_done` set, returns
// true. `all_done` once no descendant is left.
bool reap_descendants(pid_t child, int& status, bool& child_done, bool& all_done) {
  bool reaped_child = false;
  for (;;) {
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p == child) {
      status = st;
      child_done = true;
      g_child = 0;
      reaped_child = true;
    }
    if (p > 0) continue;
    if (p < 0 && errno == ECHILD) all_done = true;
    return reaped_child;
  }
}

UringWriter::Fallback fallback_for(bool require_tracing) {
  return require_tracing ? UringWriter::Fallback::kRequired : UringWriter::Fallback::kSynchronous;
}

// Starts `cmd` with this process' environment, SPANRING_SEGMENT set to `segment` (or removed
// when `segment` is empty), and with its stdout on our stderr when `stdout_to_stderr` (the
// trace goes to our stdout). Returns its pid, or 0 after saying why it could not start.
pid_t start_command(const std::vector<std::string>& cmd, const std::string& segment,
                    bool stdout_to_stderr = false) {
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "SPANRING_SEGMENT=", 17) != 0) env_storage.emplace_back(*e);
  if (!segment.empty()) env_storage.push_back("SPANRING_SEGMENT=" + segment);
  std::vector<char*> envp;
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage(cmd);
  std::vector<char*> argv;
  for (auto& s : argv_storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  if (stdout_to_stderr) ::posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t child = 0;
  const int rc = ::posix_spawnp(&child, argv[0], &actions, nullptr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    std::fprintf(stderr, "spanring: cannot start %s: %s\n", argv[0], std::strerror(rc));
    return 0;
  }
  g_child = child;
  return child;
}

// The exit status `spanring run` passes on for a waitpid status.
int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// The end of a `run` (file or flight recorder), after the summary: the hint when no thread of
// the command wrote a record, then the exit status (the command's, or kLossExitStatus).
int finish_run(const Drainer& drainer, int status, const std::vector<std::string>& cmd,
               const TracingPolicy& policy) {
  if (drainer.stats().threads == 0)
    std::fprintf(stderr, "spanring: warning: no thread of %s wrote a record: is it linked with "
                 "libspanring, and does it keep SPANRING_SEGMENT in its environment?\n",
                 cmd[0].c_str());
  const int cmd_status = exit_status(status);
  if (cmd_status == 0 && policy.fail_on_loss && lost(drainer)) return kLossExitStatus;
  return cmd_status;
}

// The segment could not be created: the workload runs all the same, untraced. Signals are
// passed on as in a traced run; returns the command's exit status.
int run_untraced(const std::vector<std::string>& cmd) {
  install_stop_handlers();
  const pid_t child = start_command(cmd, "");
  if (child == 0) return 127;
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  return exit_status(status);
}

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
  std::optional<Segment> created;
  try {
    created.emplace(Segment::create(name, opts));
  } catch (const Error& e) {
    if (policy.require_tracing) throw;
    std::fprintf(stderr, "spanring: cannot trace: %s; running %s untraced, no snapshot can be "
                 "taken (--require-tracing makes this an error)\n",
                 e.what(), cmd[0].c_str());
    return run_untraced(cmd);
  }
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
  const pid_t child = start_command(cmd, name);
  if (child == 0) {
    Segment::remove(name);
    return 127;
  }

  Drainer drainer(segment, recorder, sink);
  SegmentNameWatch name_watch(name);
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
  sig_atomic_t signals_seen = 0;
  auto next_listen = std::chrono::steady_clock::now();
  StatusLine status_line(StatusLine::wanted(policy.status_line));
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
    const sig_atomic_t signals = g_snapshot_signals;
    for (; signals_seen != signals; ++signals_seen) ask("", "SIGUSR1", -1);
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_listen) {
      listen();
      next_listen = now + std::chrono::milliseconds(100);
    }
    // A snapshot says on stderr when it is written (or fails): on a line of its own.
    if (recorder.busy()) status_line.erase();
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

}  // namespace

int cmd_run(std::string out_path, const std::string& format, const std::string& also_path,
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
  if (!old.empty())
    std::fprintf(stderr, "spanring: kept the existing %s as %s\n", out_path.c_str(), old.c_str());
  OutputFiles output(writer_path(out_path), 0, fallback_for(require_tracing), policy.limits);
  SinkChoice choice(format, also_path, true, 0, fallback_for(require_tracing));
  say_fallback(output.writer());
  const std::string name = unique_segment_name();
  std::optional<Segment> created;
  try {
    created.emplace(Segment::create(name, opts));
  } catch (const Error& e) {
    // Never stop the workload for the tracer's sake, unless asked to.
    if (require_tracing) throw;
    std::fprintf(stderr, "spanring: cannot trace: %s; running %s untraced, no trace is written "
                 "(--require-tracing makes this an error)\n",
                 e.what(), cmd[0].c_str());
    return run_untraced(cmd);
  }
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

  const pid_t child = start_command(cmd, name, is_stdout_path(out_path));
  if (child == 0) {
    Segment::remove(name);
    return 127;
  }

  Drainer drainer(segment, output, choice.sink());
  SegmentNameWatch name_watch(name);
  StatusLine status_line(StatusLine::wanted(policy.status_line));
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

int cmd_snapshot(const std::string& segment_name, const std::string& out_path) {
  try {
    std::printf("%s\n", request_snapshot(segment_name, out_path.empty() ? "" : absolute(out_path))
                            .c_str());
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const Error& e) {
    // No flight recorder, or the snapshot failed: 1. A segment that cannot be opened: the
    // CLI's setup error (2).
    if (e.code() != ErrorCode::kUnsupported && e.code() != ErrorCode::kSystem) throw;
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return 1;
  }
}

int cmd_drain(const std::string& segment_name, const std::string& out_path, std::string format,
              const std::string& also_path, const TracingPolicy& policy) {
  const bool require_tracing = policy.require_tracing;
  // First: a SIGTERM while we open the segment and recover the file must not kill us between
  // recovery steps; it is seen by the drain loop, which then drains once and stops.
  install_stop_handlers();
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
                    fallback_for(require_tracing));
  say_fallback(output.writer());
  if (keep != 0)
    std::fprintf(stderr, "spanring: resuming %s after its last commit at byte %llu\n",
                 absolute(out_path).c_str(), static_cast<unsigned long long>(keep));
  Drainer drainer(segment, output, choice.sink(), keep, prefix.pids);
  SegmentNameWatch name_watch(segment_name);
  StatusLine status_line(StatusLine::wanted(policy.status_line));
  drain_loop(drainer, name_watch, status_line, [] { return g_stop_signal != 0; });
  bool ok = drainer.finish(false);
  ok = choice.finish() && ok;
  print_summary(drainer, absolute(out_path), ok, policy.limits);
  if (!ok) return 1;
  return policy.fail_on_loss && lost(drainer) ? kLossExitStatus : 0;
}

namespace {

// Why a segment is still in use ("" when every process that could use it is dead).
std::string live_user(const Segment& seg) {
  auto alive = [](uint32_t pid, uint64_t start) {
    return pid != 0 && start != 0 && process_start_time(pid) == start;
  };
  const auto& h = seg.header();
  if (alive(h.creator_pid, h.creator_start_time))
    return "its creator pid " + std::to_string(h.creator_pid) + " is alive";
  const uint32_t drainer = h.drainer_pid.load(std::memory_order_acquire);
  if (alive(drainer, h.drainer_start_time))
    return "its drainer pid " + std::to_string(drainer) + " is alive";
  for (uint32_t i = 0; i < seg.ring_count(); ++i) {
    const auto& r = seg.ring(i);
    const uint32_t state = r.state.load(std::memory_order_acquire);
    if ((state == kRingActive || state == kRingClaiming) &&
        alive(r.owner_pid, r.owner_start_time))
      return "ring owner pid " + std::to_string(r.owner_pid) + " is alive";
  }
  return {};
}

}  // namespace

int cmd_clean(bool dry_run) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    std::string why_kept;
    const char* why_removed = "no live creator, drainer or owner";
    try {
      Segment seg = Segment::open(name);
      why_kept = live_user(seg);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotASegment) {
        std::fprintf(stderr, "spanring: kept %s: %s\n", name.c_str(), e.what());
        continue;
      }
      // No magic: a segment whose creator was killed while creating it, or not a spanring
      // segment at all (not ours to judge, and not worth a line).
      const std::optional<Segment::Creator> creator = Segment::unfinished_creator(name);
      if (!creator) continue;
      if (creator->start_time == 0 || process_start_time(creator->pid) == creator->start_time)
        why_kept = "its creator pid " + std::to_string(creator->pid) + " is still creating it";
      why_removed = "its creator died while creating it";
    }
    if (!why_kept.empty()) {
      std::fprintf(stderr, "spanring: kept %s: %s\n", name.c_str(), why_kept.c_str());
      continue;
    }
    if (dry_run) {
      std::fprintf(stderr, "spanring: would remove %s (%s)\n", name.c_str(), why_removed);
    } else if (Segment::remove(name)) {
      std::fprintf(stderr, "spanring: removed %s (%s)\n", name.c_str(), why_removed);
      ++removed;
    }
  }
  std::fprintf(stderr, "spanring: clean: %d segment(s) removed\n", removed);
  return 0;
}

}  // namespace spanring
