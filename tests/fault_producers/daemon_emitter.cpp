// daemon_emitter: a traced program that leaves a daemon behind (test_mp_fault_double_fork.cpp).
//
//   daemon_emitter --out FILE.jsonl [--spans N]
//
// top (the traced command) emits N `daemon.top` spans, makes a pipe and forks `mid`, waits for
// it, writes its JSON line and exits 0 while the grandchild is still waiting to start.
// mid emits N `daemon.mid` spans, calls setsid(), forks the grandchild, writes its line and
// _exits as soon as the grandchild has read its parent's pid (the classic double fork: the
// grandchild is orphaned and re-parented).
// grandchild points stdin/stdout/stderr at /dev/null (a daemon keeps no terminal, and the test
// harness must not be able to wait for it through its pipes), then blocks on the pipe until
// every writer is gone, i.e. until top has exited (top exits after mid is reaped, so by then the
// grandchild has been re-parented). Only then does it trace: N `daemon.grandchild` spans on its
// main thread, N `daemon.grandchild.thread` spans on a second thread, one of each nested under
// a `daemon.grandchild.outer` span; then it writes its line and exits 0.
//
// JSON lines (one per process), each with "role", "pid", "ppid", "sid", "counts" {name: n} and
// "tids" {name: tid}; the grandchild adds "ppid_before_wait" (mid's pid), "segment" (the value
// of SPANRING_SEGMENT it attached to) and "done_mono_ns" (CLOCK_MONOTONIC when it finished).
#include "emitter_util.h"

#include <CLI/CLI.hpp>

#include <spanring/span.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

using fault_emitter::append_json_line;
using fault_emitter::fail;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

void emit_n(const char* name, int n) {
  for (int i = 0; i < n; ++i) {
    spanring::Span s{name};
    s.attr("i", i);
  }
}

json base_line(const char* role) {
  return json{{"role", role},
              {"pid", ::getpid()},
              {"ppid", ::getppid()},
              {"sid", ::getsid(0)},
              {"enabled", spanring::enabled()}};
}

[[noreturn]] void grandchild(const std::string& out, int n, int pipe_read, int told_mid) {
  const pid_t ppid_before = ::getppid();
  // Tell mid we know it is our parent; it exits only after this.
  if (::write(told_mid, "x", 1) != 1) fail("write: %s", std::strerror(errno));
  ::close(told_mid);
  const int devnull = ::open("/dev/null", O_RDWR);
  if (devnull < 0) fail("open /dev/null: %s", std::strerror(errno));
  for (int fd = 0; fd <= 2; ++fd) ::dup2(devnull, fd);
  ::close(devnull);
  // EOF once top and mid, the only writers, have exited.
  char c;
  ssize_t r;
  while ((r = ::read(pipe_read, &c, 1)) != 0) {
    if (r < 0 && errno != EINTR) std::_Exit(3);  // stderr is gone: the exit status tells
  }
  ::close(pipe_read);

  json line = base_line("grandchild");
  line["ppid_before_wait"] = ppid_before;
  const char* seg = std::getenv("SPANRING_SEGMENT");
  line["segment"] = seg != nullptr ? seg : "";
  pid_t thread_tid = 0;
  {
    spanring::Span outer{"daemon.grandchild.outer"};
    emit_n("daemon.grandchild", n);
    std::thread t([&] {
      thread_tid = gettid_now();
      emit_n("daemon.grandchild.thread", n);
    });
    t.join();
  }
  line["counts"] = {{"daemon.grandchild", n},
                    {"daemon.grandchild.thread", n},
                    {"daemon.grandchild.outer", 1}};
  line["tids"] = {{"daemon.grandchild", gettid_now()},
                  {"daemon.grandchild.thread", thread_tid},
                  {"daemon.grandchild.outer", gettid_now()}};
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  line["done_mono_ns"] = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  append_json_line(out, line);
  std::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  int n = 200;
  CLI::App app{"daemon_emitter: a setsid double fork whose grandchild traces last"};
  app.add_option("--out", out, "JSON lines file")->required();
  app.add_option("--spans", n, "spans per process")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  emit_n("daemon.top", n);
  // p[0]: the grandchild's read end; p[1]: held by top and mid only, so that the grandchild sees
  // EOF once both have exited.
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) fail("pipe: %s", std::strerror(errno));
  // hello[1]: the grandchild tells mid it has read its parent's pid (mid is still alive then).
  int hello[2];
  if (::pipe2(hello, O_CLOEXEC) != 0) fail("pipe: %s", std::strerror(errno));
  const pid_t mid = ::fork();
  if (mid < 0) fail("fork: %s", std::strerror(errno));
  if (mid == 0) {
    emit_n("daemon.mid", n);
    if (::setsid() < 0) fail("setsid: %s", std::strerror(errno));
    const pid_t g = ::fork();
    if (g < 0) fail("fork: %s", std::strerror(errno));
    if (g == 0) {
      ::close(p[1]);
      ::close(hello[0]);
      grandchild(out, n, p[0], hello[1]);
    }
    ::close(hello[1]);
    char c;
    while (::read(hello[0], &c, 1) < 0 && errno == EINTR) {
    }
    json line = base_line("mid");
    line["counts"] = {{"daemon.mid", n}};
    line["tids"] = {{"daemon.mid", gettid_now()}};
    line["grandchild_pid"] = g;
    append_json_line(out, line);
    ::_exit(0);
  }
  ::close(p[0]);
  ::close(hello[0]);
  ::close(hello[1]);
  int status = 0;
  while (::waitpid(mid, &status, 0) < 0) {
    if (errno != EINTR) fail("waitpid: %s", std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("mid exited with status %d", status);
  json line = base_line("top");
  line["counts"] = {{"daemon.top", n}};
  line["tids"] = {{"daemon.top", gettid_now()}};
  line["mid_pid"] = mid;
  append_json_line(out, line);
  // Exiting closes p[1], the last write end: the grandchild starts tracing after this.
  return 0;
}
