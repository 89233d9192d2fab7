#include "cli/child_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace spanring {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
volatile pid_t g_child = 0;

void on_stop_signal(int sig) {
  g_stop_signal = sig;
  if (g_child > 0) ::kill(g_child, sig);
}

volatile sig_atomic_t g_snapshot_signals = 0;
// SIGPIPE had the default action before ignore_sigpipe(): a started command gets it back.
bool g_sigpipe_default = false;

void on_snapshot_signal(int) { g_snapshot_signals = g_snapshot_signals + 1; }

// write(2): async-signal-safe.
void on_snapshot_signal_refused(int) {
  static constexpr char kMsg[] =
      "spanring: SIGUSR1 ignored: this drainer writes its trace to a file and keeps no snapshot "
      "window (spanring run --flight-recorder SIZE does)\n";
  const ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)n;
}

void install(int sig, void (*handler)(int), int flags) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  ::sigaction(sig, &sa, nullptr);
}

}  // namespace

void install_stop_handlers() {
  install(SIGINT, on_stop_signal, 0);
  install(SIGTERM, on_stop_signal, 0);
}

int stop_signal() noexcept { return g_stop_signal; }

void ignore_sigpipe() {
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  if (::sigaction(SIGPIPE, &sa, &old) == 0 && old.sa_handler == SIG_DFL) g_sigpipe_default = true;
}

// SA_RESTART: a snapshot request must not cut a read or a wait short.
void install_snapshot_handler() { install(SIGUSR1, on_snapshot_signal, SA_RESTART); }

int snapshot_signals() noexcept { return g_snapshot_signals; }

void refuse_snapshot_signal() { install(SIGUSR1, on_snapshot_signal_refused, SA_RESTART); }

pid_t start_command(const std::vector<std::string>& cmd, const std::string& segment,
                    bool stdout_to_stderr) {
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
  // The command starts with SIGPIPE's default action when this process had it before
  // ignore_sigpipe() (an ignored signal stays ignored across exec).
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  if (g_sigpipe_default) {
    sigset_t dfl;
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    ::posix_spawnattr_setsigdefault(&attr, &dfl);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  }
  pid_t child = 0;
  const int rc = ::posix_spawnp(&child, argv[0], &actions, &attr, argv.data(), envp.data());
  ::posix_spawnattr_destroy(&attr);
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    std::fprintf(stderr, "spanring: cannot start %s: %s\n", argv[0], std::strerror(rc));
    return 0;
  }
  g_child = child;
  return child;
}

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

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

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

}  // namespace spanring
