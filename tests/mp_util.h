// Helpers shared by the multi-process tests (suite 'mp'): a fresh temporary directory, running a
// program with its stdout and stderr captured (posix_spawn, own process group, a deadline), the
// stderr lines of `spanring run`, and the checks that every trace file must pass. Running a
// program under `spanring run` is traced_run.h.
#pragma once

#include "strace_parser.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace spanring_test {

// mkdtemp under $TMPDIR (or /tmp); removed with its contents on destruction unless
// SPANRING_KEEP_TMP is set (then its path is printed, for looking at a failed run's files).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct RunResult {
  int exit_code = -1;   // WEXITSTATUS, or -1 when not exited normally
  int term_signal = 0;  // WTERMSIG when killed by a signal
  bool timed_out = false;
  std::string cleanup;           // what was removed after a timeout
  std::string out;               // captured stdout
  std::string err;               // captured stderr
  std::string describe() const;  // status and the captured stderr, for failure messages
};

// Runs argv[0] (a path, not searched in PATH) with the caller's environment minus
// SPANRING_SEGMENT (a test is never itself traced), in its own process group. Waits for the
// process and for both pipes to close (which also waits for descendants that keep them open).
// After `timeout_s` seconds the whole process group is killed with SIGKILL and timed_out is set
// (the default stays under meson's 60 s, so that a hang is reported with the captured stderr
// rather than as a bare meson timeout). A killed `spanring run` cannot remove its segment, so
// then /dev/shm/spanring-<pid>-* of the killed pid is removed too (best effort: that is the
// naming scheme of unique_segment_name, cli/drain_session.h).
RunResult run_process(const std::vector<std::string>& argv, int timeout_s = 40);

// Emulated runs (.ci/run's aarch64 step, cross/aarch64-linux-gnu.ini): when
// SPANRING_TEST_EXEC_WRAPPER is set (e.g. "/usr/bin/qemu-aarch64"), a program of this build's
// own architecture is started as `<wrapper words...> <argv...>`, since qemu-user passes execve
// to the host kernel, which cannot run a foreign ELF without binfmt_misc. Anything else (a
// script, a host program such as /usr/bin/env) is started as is. run_process applies it to
// its argv, spanring_run (traced_run.h) to the command after `--` too.
std::vector<std::string> exec_argv(const std::vector<std::string>& argv);
// The wrapper's words, empty when not set: a test that cannot run emulated (LD_PRELOAD into a
// foreign program, syscall tracing) skips with this as its reason.
std::vector<std::string> exec_wrapper();

// True in the stress variant of a test: SPANRING_STRESS=1, which tests/meson.build sets on the
// tests it registers with -Dstress=true.
bool stress();

// True when this build has test points: SPANRING_TEST_POINTS_BUILT=1, which the meson.build of
// every test that arms one sets from the test_points option.
bool test_points_built();

// For a test that arms a test point: exits 77 (meson's skip) with a message on stderr when the
// build has none (-Dtest_points=disabled, or a release build's default), where it would fail.
void skip_without_test_points();

// The path in environment variable `var` (set by tests/meson.build); fails the test when unset
// or not an executable file.
std::string exe_from_env(const char* var);

std::string read_file(const std::string& path);

// `spanring: summary: written=N dropped=M unfinished=U processes=P threads=T`
struct Summary {
  uint64_t written = 0;
  uint64_t dropped = 0;
  uint64_t unfinished = 0;
  uint64_t processes = 0;
  uint64_t threads = 0;
};
// nullopt (and a failed check naming the problem) when stderr does not hold exactly one
// well-formed summary line.
std::optional<Summary> parse_summary(const std::string& stderr_text);

// `spanring: wrote N records to PATH`: (N, PATH), or nullopt.
std::optional<std::pair<uint64_t, std::string>> parse_wrote(const std::string& stderr_text);

// NAME from the first line `spanring: segment NAME (...` (the line `spanring run` and
// `spanring drain` print when they start), or nullopt.
std::optional<std::string> segment_from_stderr(const std::string& stderr_text);

// Lines of `text` that start with `prefix`, without their LF.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix);

// A parsed trace file with the per-pid facts the tests need.
struct Trace {
  ParsedText text;
  std::vector<SpanLine> spans;  // in file order
  std::vector<AnchorLine> anchors;
  std::vector<DropsLine> drops;
  std::map<std::string, uint64_t> count_by_name;  // encoded names
  std::map<uint64_t, uint64_t> dropped_by_pid;    // sum of dropped= over drop lines
  uint64_t dropped_total = 0;
  std::set<uint64_t> pids_with_name_prefix(const std::string& prefix) const;
  uint64_t count(const std::string& name) const;  // [STRACE] lines with this encoded name
};
Trace load_trace(const std::string& path);

// The checks every trace of `spanring run` must pass, each a doctest CHECK with a message:
// - every line parses (no error, no line of another kind);
// - every pid that has a span has exactly one anchor, and it comes before that pid's first
//   span; no pid has two anchors;
// - the anchor's mono_ns is <= the ts of every host span of its pid (clk=dev spans excepted);
// - a prefixed span's E equals ts + dur for host spans (spanring documents E = span end);
// - the summary: written == number of span lines, dropped == the sum over drop lines,
//   processes == distinct pids with spans, threads >= distinct (pid, tid) with spans (it counts ring owners);
// - the `wrote N records to PATH` line: N == written and PATH == out_path.
void check_trace_invariants(const Trace& trace, const Summary& summary,
                            const std::string& stderr_text, const std::string& out_path);

}  // namespace spanring_test
