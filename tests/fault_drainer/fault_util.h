// Helpers of the fault tests (suite 'fault'): starting processes that the test then stops,
// kills or starves (unlike mp_util's run_process, which waits for its process), the emitter's
// report page, and the accounting check that every fault test applies to a trace: each record a
// thread emitted is in the file exactly once, as a [STRACE] line or inside a drop range.
#pragma once

#include "fault_report.h"
#include "mp_util.h"
#include "strace_parser.h"

#include <spanring/segment_layout.h>
#include <spanring/segment_view.h>

#include <sys/types.h>

#include <cstddef>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fault_test {

using spanring_test::lines_starting;
using spanring_test::segment_from_stderr;
using spanring_test::TempDir;

// A tmpfs of `size` (a mount option's size: "1m", "256k") mounted on `dir` (created) for the
// object's life: the file system a full-disk test fills. Exits the test with 77 (skipped), saying
// why, where mounting is not permitted (not root, no CAP_SYS_ADMIN).
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, const char* size);
  ~TmpfsMount();
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

 private:
  std::string dir_;
};

// How to start a process (fork + execve, in its own process group). Its environment is the
// test's minus SPANRING_SEGMENT and SPANRING_TEST_POINT* (a test is never traced, and a test
// point is armed only where a test sets it), plus `env`.
struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is a path (not searched in PATH)
  std::vector<std::pair<std::string, std::string>> env;
  std::string stdout_path;  // file to write stdout to; "" = /dev/null (unless stdout_fd)
  std::string stderr_path;  // file to write stderr to; "" = /dev/null
  int stdout_fd = -1;       // when >= 0, becomes the child's stdout (a pipe's write end, say)
  int umask = -1;           // when >= 0, the child's umask
  int uid = -1;             // when >= 0: setgroups({}), setgid(uid), setuid(uid) before exec
};

// Starts the process; FAILs the test when fork or exec fails (an exec error is passed back
// through a close-on-exec pipe, so a wrong path is reported as such).
pid_t spawn(const SpawnOptions& options);

// What became of a child process.
struct Exit {
  bool timed_out = false;  // still running at the deadline: its group was SIGKILLed
  int code = -1;           // exit status, or -1
  int sig = 0;             // terminating signal, or 0
  bool exited_ok() const { return !timed_out && code == 0; }
  std::string describe() const;
};

// Waits for child `pid` up to `timeout_s`; past it, SIGKILLs its process group and reaps it.
Exit wait_exit(pid_t pid, double timeout_s);

// Polls `done` every `poll_ms` until it holds (true) or `timeout_s` passes (false).
bool wait_until(const std::function<bool()>& done, double timeout_s, int poll_ms = 2);

// True once process `pid` catches signal `sig` (SigCgt in /proc/PID/status): a drainer sent
// SIGTERM before it installed its handler would die of it instead of draining and exiting 0.
bool catches_signal(pid_t pid, int sig);

// Kills (SIGKILL) and reaps a child's process group on scope exit, unless released: a failed
// REQUIRE must not leave a flat-out emitter or a drainer running.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid = -1) : pid_(pid) {}
  ~ChildGuard();
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  void reset(pid_t pid) { pid_ = pid; }
  void release() { pid_ = -1; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// Makes this process the subreaper of its descendants: an emitter whose `spanring run` was
// killed is re-parented to the test, which can then wait for it (PID 1 of a container may
// never reap it, and a zombie would look alive to kill(pid, 0)).
void become_subreaper();
// Reaps every exited descendant (non-blocking).
void reap_zombies();

// Removes the named shared-memory segment on scope exit (best effort).
class SegmentGuard {
 public:
  SegmentGuard() = default;
  explicit SegmentGuard(std::string name) : name_(std::move(name)) {}
  ~SegmentGuard();
  SegmentGuard(const SegmentGuard&) = delete;
  SegmentGuard& operator=(const SegmentGuard&) = delete;
  void reset(std::string name) { name_ = std::move(name); }

 private:
  std::string name_;
};

// A mapping of a segment by name (shm_open + mmap of the whole object), for the tests that look
// into or write into a segment behind the drainer's back. Not spanring::Segment: it checks
// nothing, so it also maps objects that spanring refuses.
class ShmView {
 public:
  ShmView() = default;
  // Maps /dev/shm/<name>; returns false (errno set) when it cannot.
  bool open(const std::string& name, bool writable);
  ~ShmView();
  ShmView(const ShmView&) = delete;
  ShmView& operator=(const ShmView&) = delete;
  bool mapped() const { return base_ != nullptr; }
  size_t size() const { return size_; }
  std::byte* base() const { return base_; }
  spanring::SegmentHeader& header() const { return *reinterpret_cast<spanring::SegmentHeader*>(base_); }
  // The mapping as a validated segment (REQUIREs that it is one), and ring i of it through
  // that view: the tests compute no ring or slot address by hand.
  spanring::SegmentView view() const;
  spanring::RingHeader& ring(uint32_t i) const;
  std::byte* ring_slots(uint32_t i) const;
  // Every byte of the object, as it is now.
  std::string bytes() const;

 private:
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

// Creates `path` at the report page's size (zero-filled) and maps it.
class ReportMap {
 public:
  explicit ReportMap(const std::string& path);
  ~ReportMap();
  ReportMap(const ReportMap&) = delete;
  ReportMap& operator=(const ReportMap&) = delete;
  fault::Report* operator->() const { return report_; }
  fault::Report& operator*() const { return *report_; }
  const std::string& path() const { return path_; }
  // True once the emitter published its pid (magic).
  bool ready() const;

 private:
  std::string path_;
  fault::Report* report_ = nullptr;
};

// File contents ("" when missing); unlike spanring_test::read_file, no failure.
std::string slurp(const std::string& path);
bool file_exists(const std::string& path);

// `spanring run` or `spanring drain` started in the background: spawn(options) with its stderr
// in options.stderr_path (required), then a wait of up to `timeout_s` for the line it prints
// when it starts, `spanring: segment NAME (...`, which is REQUIREd (the failure shows the stderr
// so far). Like ChildGuard, it SIGKILLs and reaps the process group on destruction unless
// released, so a failed REQUIRE, here or later in the test, leaves no drainer running.
class BackgroundDrainer {
 public:
  BackgroundDrainer(const SpawnOptions& options, double timeout_s);
  pid_t pid() const { return guard_.pid(); }
  const std::string& segment() const { return segment_; }
  // Once the test has reaped the process itself (wait_exit), there is nothing left to kill.
  void release() { guard_.release(); }

 private:
  ChildGuard guard_;
  std::string segment_;
};

// The value of `key=<decimal>` on the `spanring: summary:` line, or nullopt.
std::optional<uint64_t> summary_value(const std::string& stderr_text, const std::string& key);

// /proc/PID/task/*: (tid, state letter, comm) per thread of a process.
struct TaskState {
  int tid;
  char state;
  std::string comm;
};
std::vector<TaskState> task_states(pid_t pid);

// After SIGSTOP: every thread of the drainer `pid` is stopped (state T); io_uring's kernel
// workers (iou-*), which handle no job signals, are not counted.
bool drainer_stopped(pid_t pid);

// What one emitting thread says it did (the emitter's JSON).
struct EmittedThread {
  std::string name;  // encoded span name, e.g. fault.t0
  uint64_t tid = 0;
  uint64_t emitted = 0;
  uint64_t stored = 0;
};
struct Emitted {
  uint64_t pid = 0;
  bool enabled = false;
  std::string segment;
  std::vector<EmittedThread> threads;
};
Emitted load_emitted(const std::string& json_path);

// While one exists, the trace checks below (check_thread_accounting, parse_and_check_form,
// check_anchors) append what they find wrong to `into` instead of failing the test: the
// negative controls use it to show that each check can fail.
class CaptureProblems {
 public:
  explicit CaptureProblems(std::vector<std::string>& into);
  ~CaptureProblems();
  CaptureProblems(const CaptureProblems&) = delete;
  CaptureProblems& operator=(const CaptureProblems&) = delete;
};

// The lines of one ring owner (pid, tid), in file order.
struct OwnerLines {
  std::vector<const spanring_test::SpanLine*> spans;
  std::vector<const spanring_test::DropsLine*> drops;
};
std::map<std::pair<uint64_t, uint64_t>, OwnerLines> lines_by_owner(
    const spanring_test::ParsedText& text);

struct Accounting {
  uint64_t written = 0;  // [STRACE] lines of the thread
  uint64_t dropped = 0;  // records inside its drop ranges
  std::map<std::string, uint64_t> dropped_by_reason;
};
// Checks one emitting thread's records in a trace, each a doctest CHECK naming `label`:
// every span carries the thread's name and an integer seq=; seqs increase in file order; the
// written seqs and the drop ranges (dropped == last - first + 1) together cover 0..emitted-1
// exactly once (nothing lost, nothing twice, nothing invented); when `stored` is given, the
// number written equals it (a record the ring accepted is never lost).
Accounting check_thread_accounting(const OwnerLines& lines, const EmittedThread& thread,
                                   uint64_t pid, std::optional<uint64_t> stored,
                                   const std::string& label);

// Checks the whole file's form, each a CHECK naming `label`: it ends with LF, holds no NUL
// byte (a hole), every line parses with the strict parser (a line of another kind only when it
// starts with one of `allowed_other`), and the good lines' lengths add up to the file size.
// Returns the parsed text (other kinds included).
spanring_test::ParsedText parse_and_check_form(const std::string& text,
                                               const std::vector<std::string>& allowed_other,
                                               const std::string& label);

// One [CLOCK_ANCHOR] per pid, before the pid's first span; for pids in `strict_pids` (all when
// empty) every host span starts at or after the anchor's mono_ns.
void check_anchors(const spanring_test::ParsedText& parsed, const std::vector<uint64_t>& strict_pids,
                   const std::string& label);

}  // namespace fault_test
