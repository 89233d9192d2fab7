// The live status line of `spanring run` and `spanring drain` (cli/status_line.h), with real
// processes on a real pseudo-terminal (forkpty): on a terminal it is drawn (records written,
// records/s, drops), redrawn in place, and erased before the summary, whose lines stay clean;
// `--no-status` and SPANRING_NO_STATUS=1 turn it off; with stderr on a pipe it never appears.
#include "fault_util.h"

#include <spanring/segment.h>

#include <doctest/doctest.h>

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 30;
constexpr char kErase[] = "\r\033[K";  // what the status line draws and erases with

struct PtyRun {
  std::string out;  // everything the terminal received (stdout and stderr)
  Exit exit;
};

// Runs argv on a new pseudo-terminal (its stdin, stdout and stderr), with `env` added and
// SPANRING_SEGMENT / SPANRING_NO_STATUS removed unless `env` sets them. With `term_after_s` > 0
// the process gets SIGTERM that long after it started. Reads the terminal until every process
// holding it has closed it.
PtyRun run_on_pty(const std::vector<std::string>& argv,
                  const std::vector<std::pair<std::string, std::string>>& env,
                  double term_after_s = 0) {
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::unsetenv("SPANRING_SEGMENT");
    ::unsetenv("SPANRING_NO_STATUS");
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ChildGuard guard(pid);
  PtyRun r;
  const auto start = std::chrono::steady_clock::now();
  bool termed = false;
  for (;;) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (term_after_s > 0 && !termed && elapsed >= term_after_s) {
      ::kill(pid, SIGTERM);
      termed = true;
    }
    REQUIRE_MESSAGE(elapsed < kWaitS, "no end of output after ", kWaitS, " s:\n", r.out);
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO: every holder of the terminal has closed it
    r.out.append(buf, static_cast<size_t>(n));
  }
  ::close(master);
  r.exit = wait_exit(pid, kWaitS);
  guard.release();
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Checks a terminal's output holds status lines that end erased before the summary, and that
// the last status line's count does not exceed the summary's.
void check_status_then_summary(const std::string& out) {
  INFO("terminal output:\n", out);
  const size_t draws = count(out, "records/s");
  CHECK(draws >= 1);
  const size_t last = out.rfind(" records/s, ");
  REQUIRE(last != std::string::npos);
  const size_t last_draw = out.rfind(std::string(kErase) + "spanring: ", last);
  REQUIRE(last_draw != std::string::npos);
  const uint64_t shown = std::strtoull(out.c_str() + last_draw + 4 + 10, nullptr, 10);
  // The line is erased (carriage return, erase to end of line) before anything else is said.
  const size_t erased = out.find(kErase, last);
  REQUIRE_MESSAGE(erased != std::string::npos, "the last status line was never erased");
  const size_t summary = out.find("spanring: summary: ", last);
  REQUIRE(summary != std::string::npos);
  CHECK(erased < summary);
  CHECK(out.find("spanring:", last + 1) > erased);  // no message glued to the status line
  const auto written = summary_value(out.substr(summary), "written");
  REQUIRE(written.has_value());
  CHECK(shown <= *written);
}

}  // namespace

TEST_SUITE("mp") {

TEST_CASE("spanring run draws a live status line on a terminal and erases it before the summary; --no-status, SPANRING_NO_STATUS=1 and a pipe have none") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  // Long enough for a redraw or two (one a second) even on a loaded machine.
  const std::vector<std::string> work = {emitter, "--threads", "2", "--seconds", "3",
                                         "--pace-us", "200"};
  const auto run_args = [&](std::vector<std::string> options) {
    std::vector<std::string> argv = {spanring, "run", "-o", tmp.file("out.strace")};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back("--");
    argv.insert(argv.end(), work.begin(), work.end());
    return argv;
  };

  const PtyRun shown = run_on_pty(run_args({}), {});
  CHECK_MESSAGE(shown.exit.exited_ok(), shown.exit.describe(), "\n", shown.out);
  check_status_then_summary(shown.out);

  const PtyRun off = run_on_pty(run_args({"--no-status"}), {});
  CHECK(off.exit.exited_ok());
  CHECK_MESSAGE(off.out.find("records/s") == std::string::npos, off.out);
  CHECK(off.out.find("\033[K") == std::string::npos);
  CHECK(off.out.find("spanring: summary: ") != std::string::npos);

  const PtyRun env_off = run_on_pty(run_args({}), {{"SPANRING_NO_STATUS", "1"}});
  CHECK(env_off.exit.exited_ok());
  CHECK_MESSAGE(env_off.out.find("records/s") == std::string::npos, env_off.out);
  CHECK(env_off.out.find("spanring: summary: ") != std::string::npos);

  // stderr on a pipe (run_process): never, although the run is as long.
  const spanring_test::RunResult piped = spanring_test::run_process(run_args({}), 30);
  CHECK_MESSAGE(piped.exit_code == 0, piped.describe());
  CHECK_MESSAGE(piped.err.find("records/s") == std::string::npos, piped.err);
  CHECK(piped.err.find('\033') == std::string::npos);
  CHECK(piped.err.find("spanring: summary: ") != std::string::npos);
}

TEST_CASE("spanring drain draws the status line on a terminal and erases it before its summary") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string name = "spanring-statustest-" + std::to_string(::getpid());
  SegmentGuard guard(name);
  spanring::Segment::create(name, spanring::SegmentOptions{16, 4096});
  const pid_t producer = spawn({{emitter, "--threads", "2", "--seconds", "6", "--pace-us", "200"},
                                {{"SPANRING_SEGMENT", name}}, "", tmp.file("emitter.err")});
  ChildGuard producer_guard(producer);
  const PtyRun drained =
      run_on_pty({spanring, "drain", "--segment", name, "-o", tmp.file("out.strace")}, {}, 3.5);
  CHECK_MESSAGE(drained.exit.exited_ok(), drained.exit.describe(), "\n", drained.out);
  check_status_then_summary(drained.out);
}

}  // TEST_SUITE
