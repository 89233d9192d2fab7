// owners_emitter: many silent ring owners. Each of --threads threads emits one record
// (`owners.t<i>`, claiming a ring) and then waits, silent, holding its ring, until the process
// is killed. The drainer must watch every one of them for its owner's death.
//
//   owners_emitter [--threads N] [--raw-exit K] [--leader-exit 1]
//
// --raw-exit K: the first K threads end with the raw exit syscall after their record, so no
//   thread-exit handler runs and their rings are never released: the drainer must find these
//   owners dead (thread exited, process alive).
// --leader-exit 1: the main thread emits one record too, prints, then ends with the raw exit
//   syscall: it stays a zombie leader while the other threads run (only /proc shows it).
// Once every thread has its ring (and the --raw-exit threads are gone), prints one JSON line on
// stdout: {"pid": P, "leader_exited": 0|1, "tids": [...], "raw_exited": [...]} (tids of the
// threads that stay, then of those that exited; the leader's record is under pid P, tid P).
// Exit status: killed (it never returns), 2 on bad usage.
#include <CLI/CLI.hpp>

#include <spanring/span.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<uint32_t> g_done{0};

void owner(uint32_t index, uint32_t threads, bool raw_exit, std::atomic<long>& tid_out) {
  char name[32];
  std::snprintf(name, sizeof name, "owners.t%u", index);
  spanring::emit(name, spanring::now_ns(), 1, "");
  tid_out.store(::syscall(SYS_gettid), std::memory_order_relaxed);
  g_done.fetch_add(1, std::memory_order_release);
  if (!raw_exit) {
    for (;;) ::pause();
  }
  // Only once every thread has its ring: a ring freed earlier could be claimed again by a
  // thread of this process still starting, and the test could no longer tell whose it was.
  while (g_done.load(std::memory_order_acquire) < threads)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::syscall(SYS_exit, 0);  // this thread only; no key destructor runs
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t threads = 64;
  uint32_t raw_exit = 0;
  bool leader_exit = false;
  CLI::App app{"owners_emitter: many silent ring owners"};
  app.add_option("--threads", threads, "owner threads")->check(CLI::Range(1u, 4096u));
  app.add_option("--raw-exit", raw_exit, "threads that exit without releasing their ring");
  app.add_option("--leader-exit", leader_exit, "1: the main thread exits (raw) after its record");
  CLI11_PARSE(app, argc, argv);
  if (raw_exit > threads) raw_exit = threads;

  std::vector<std::atomic<long>> tids(threads);
  for (uint32_t i = 0; i < threads; ++i) {
    tids[i].store(0, std::memory_order_relaxed);
    std::thread(owner, i, threads, i < raw_exit, std::ref(tids[i])).detach();
  }
  if (leader_exit) spanring::emit("owners.leader", spanring::now_ns(), 1, "");
  while (g_done.load(std::memory_order_acquire) < threads)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The raw-exited threads are gone once their task directories are.
  for (uint32_t i = 0; i < raw_exit; ++i) {
    const std::string task = "/proc/self/task/" + std::to_string(tids[i].load());
    while (::access(task.c_str(), F_OK) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string line = "{\"pid\": " + std::to_string(::getpid()) +
                     ", \"leader_exited\": " + (leader_exit ? "1" : "0") + ", \"tids\": [";
  for (uint32_t i = raw_exit; i < threads; ++i)
    line += (i > raw_exit ? ", " : "") + std::to_string(tids[i].load());
  line += "], \"raw_exited\": [";
  for (uint32_t i = 0; i < raw_exit; ++i)
    line += (i > 0 ? ", " : "") + std::to_string(tids[i].load());
  line += "]}\n";
  (void)!::write(STDOUT_FILENO, line.data(), line.size());
  if (leader_exit) ::syscall(SYS_exit, 0);
  for (;;) ::pause();
}
