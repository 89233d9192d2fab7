// spawn_emitter: a traced program that starts copies of itself by posix_spawn, by vfork+execve
// and by system() (test_mp_fault_spawn_exec.cpp).
//
//   spawn_emitter --out FILE.jsonl [--spans N]              the parent
//   spawn_emitter --out FILE.jsonl --child HOW [--spans N]  a child (HOW names how it started)
//
// Parent: N `spawn.parent` spans, then one child each way, waiting for each, then N more.
// The vfork child, before it calls execve, emits one span through each producer API: these
// run on the parent's memory and must be dropped (reason=vfork), never written into the
// parent's ring. Everything the child runs between vfork and execve was prepared before the
// vfork (argv, envp): it only calls the three emit functions and execve.
// Child: records whether tracing is on (it attaches from SPANRING_SEGMENT in its environment),
// emits N `spawn.child.<HOW>` spans (Span and spanring_emit alternately), writes its line.
//
// JSON lines: the parent's {"role": "parent", "pid", "counts": {"spawn.parent": 2N},
// "children": {"posix_spawn": pid, "vfork": pid}, "vfork_pre_exec_emits": 3,
// "system_status": wait status}; each child's {"role": "child", "how", "pid", "tid",
// "enabled", "counts": {"spawn.child.<HOW>": N}}.
#include "emitter_util.h"

#include <CLI/CLI.hpp>

#include <spanring/span.h>
#include <spanring/spanring.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

using fault_emitter::append_json_line;
using fault_emitter::fail;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

constexpr int kVforkPreExecEmits = 3;  // one per API: emit, Span, spanring_emit

int child_main(const std::string& out, const std::string& how, int n) {
  const std::string name = "spawn.child." + how;
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      spanring::Span s{name.c_str()};
      s.attr("i", i);
    } else {
      spanring_span r{};
      r.timestamp_ns = spanring_now_ns();
      r.duration_ns = 10;
      r.name = name.c_str();
      r.attributes = "api=c";
      spanring_emit(&r);
    }
  }
  append_json_line(out, json{{"role", "child"},
                             {"how", how},
                             {"pid", ::getpid()},
                             {"tid", gettid_now()},
                             {"ppid", ::getppid()},
                             {"enabled", spanring::enabled()},
                             {"counts", {{name, n}}}});
  return 0;
}

int wait_for(pid_t pid, const char* what) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("waitpid(%s): %s", what, std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail("the %s child exited with status %d", what, status);
  }
  return status;
}

void emit_parent(int n, int from) {
  for (int i = from; i < from + n; ++i) {
    spanring::Span s{"spawn.parent"};
    s.attr("i", i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  std::string how;
  int n = 100;
  CLI::App app{"spawn_emitter: children started by posix_spawn, vfork+execve and system()"};
  app.add_option("--out", out, "JSON lines file")->required();
  app.add_option("--child", how, "run as the child started this way (set by the parent)");
  app.add_option("--spans", n, "spans per process")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (!how.empty()) return child_main(out, how, n);

  emit_parent(n, 0);
  const std::string self = "/proc/self/exe";  // resolved by the kernel at exec time
  char exe[4096];
  const ssize_t len = ::readlink(self.c_str(), exe, sizeof exe - 1);
  if (len <= 0) fail("readlink /proc/self/exe: %s", std::strerror(errno));
  exe[len] = '\0';
  const std::string n_text = std::to_string(n);

  // posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK), no user code before exec).
  std::vector<std::string> spawn_args = {exe, "--out", out, "--child", "posix_spawn", "--spans",
                                         n_text};
  std::vector<char*> spawn_argv;
  for (auto& a : spawn_args) spawn_argv.push_back(a.data());
  spawn_argv.push_back(nullptr);
  pid_t spawned = 0;
  const int rc = ::posix_spawn(&spawned, exe, nullptr, nullptr, spawn_argv.data(), environ);
  if (rc != 0) fail("posix_spawn: %s", std::strerror(rc));
  wait_for(spawned, "posix_spawn");

  // vfork + execve. Prepared before the vfork: the child must not allocate.
  std::vector<std::string> vfork_args = {exe, "--out", out, "--child", "vfork", "--spans",
                                         n_text};
  std::vector<char*> vfork_argv;
  for (auto& a : vfork_args) vfork_argv.push_back(a.data());
  vfork_argv.push_back(nullptr);
  spanring_span pre{};
  pre.name = "spawn.vfork.before_exec.c";
  pre.duration_ns = 1;
  const int64_t pre_ts = spanring::now_ns();
  pre.timestamp_ns = pre_ts;
  const pid_t vforked = ::vfork();
  if (vforked == 0) {
    // The vfork child, on the parent's memory: each of these must be dropped, not written.
    spanring::emit("spawn.vfork.before_exec", pre_ts, 1);
    { spanring::Span s{"spawn.vfork.before_exec.span"}; }
    spanring_emit(&pre);
    ::execve(exe, vfork_argv.data(), environ);
    ::_exit(127);
  }
  if (vforked < 0) fail("vfork: %s", std::strerror(errno));
  wait_for(vforked, "vfork");

  // system(): /bin/sh -c, which runs the child with the environment it inherited.
  const std::string cmd = "'" + std::string(exe) + "' --out '" + out +
                          "' --child system --spans " + n_text;
  const int sys = std::system(cmd.c_str());
  if (sys == -1 || !WIFEXITED(sys) || WEXITSTATUS(sys) != 0) {
    fail("system(%s) returned %d", cmd.c_str(), sys);
  }

  emit_parent(n, n);
  append_json_line(out, json{{"role", "parent"},
                             {"pid", ::getpid()},
                             {"tid", gettid_now()},
                             {"counts", {{"spawn.parent", 2 * n}}},
                             {"children", {{"posix_spawn", spawned}, {"vfork", vforked}}},
                             {"vfork_pre_exec_emits", kVforkPreExecEmits},
                             {"vfork_pre_exec_names",
                              {"spawn.vfork.before_exec", "spawn.vfork.before_exec.span",
                               "spawn.vfork.before_exec.c"}},
                             {"system_status", sys}});
  return 0;
}
