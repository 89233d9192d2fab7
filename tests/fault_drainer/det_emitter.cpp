// det_emitter: emits the deterministic workload of det_workload.h from its main thread with
// spanring::emit_record (records 0..N-1, in order), then writes what it did as JSON. It writes
// nothing on stdout (the pipe test reads `spanring run -o /dev/stdout` from the same pipe).
//
//   det_emitter --out FILE.json [--count N] [--pace-us U] [--hold N:FILE]... [--nested 1]
//               [--fork-nested 1]
//
// --pace-us U: sleeps U us after every record (timer slack 1 us).
// --hold N:FILE: before record N (N = count: before exiting) waits until FILE exists, polling
//   every 5 ms, so that a test decides when the workload goes on or ends instead of racing its
//   pace (exit 1 after 300 s without FILE). Repeatable.
// --nested 1: instead of the workload, three host spans that end in reverse order of their
//   starts, all starting before the process attached (ts 1.0 s + 200, + 100, + 0 of
//   CLOCK_MONOTONIC, emitted in that order): as a forked child's inherited open spans end.
// --fork-nested 1: opens Span det.fork.outer, then det.fork.inner, waits 2 ms and forks inside
//   both; parent and child each leave the two scopes (inner ends first), the child exits 0 and
//   the parent waits for it. The child's anchor is taken at the fork, after both spans began.
// JSON: {"pid": P, "tid": T, "enabled": 0|1, "count": N}. Exit 0; 1 when the JSON cannot be
// written; CLI11's code on bad usage.
#include "det_workload.h"

#include <spanring/span.h>

#include <CLI/CLI.hpp>

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <charconv>
#include <cstring>
#include <map>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::string out;
  uint64_t count = 4000;
  uint64_t pace_us = 0;
  bool nested = false;
  bool fork_nested = false;
  std::vector<std::string> holds;
  CLI::App app{"det_emitter: the deterministic workload of det_workload.h"};
  app.add_option("--out", out, "JSON file")->required();
  app.add_option("--count", count, "records of the workload");
  app.add_option("--pace-us", pace_us, "sleep after every record, us");
  app.add_option("--hold", holds, "N:FILE: before record N, wait until FILE exists");
  app.add_option("--nested", nested, "1: three nested spans from before the attach instead");
  app.add_option("--fork-nested", fork_nested, "1: a fork inside two open spans instead");
  CLI11_PARSE(app, argc, argv);
  std::map<uint64_t, std::vector<std::string>> hold_at;  // record index -> files to wait for
  for (const std::string& h : holds) {
    const size_t colon = h.find(':');
    const char* n_end = h.data() + (colon == std::string::npos ? 0 : colon);
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(h.data(), n_end, n);
    if (colon == std::string::npos || ec != std::errc() || end != n_end || colon + 1 == h.size()) {
      std::fprintf(stderr, "det_emitter: --hold takes N:FILE, not '%s'\n", h.c_str());
      return 2;
    }
    hold_at[n].push_back(h.substr(colon + 1));
  }
  const auto hold = [&](uint64_t i) {
    const auto it = hold_at.find(i);
    if (it == hold_at.end()) return true;
    for (const std::string& file : it->second) {
      for (int polls = 0; ::access(file.c_str(), F_OK) != 0; ++polls) {
        if (polls == 60000) {
          std::fprintf(stderr, "det_emitter: %s never appeared\n", file.c_str());
          return false;
        }
        const struct timespec ts = {0, 5 * 1000 * 1000};
        ::nanosleep(&ts, nullptr);
      }
    }
    return true;
  };
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  if (fork_nested) {
    count = 2;
    pid_t child = -1;
    {
      spanring::Span outer{"det.fork.outer"};
      {
        spanring::Span inner{"det.fork.inner"};
        const struct timespec ts = {0, 2 * 1000 * 1000};
        ::nanosleep(&ts, nullptr);
        child = ::fork();
      }
    }
    if (child == 0) std::exit(0);
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "det_emitter: fork/child failed\n");
      return 1;
    }
  } else if (nested) {
    count = 3;
    for (int64_t k = 2; k >= 0; --k) {
      const std::string name = "det.nested" + std::string(static_cast<size_t>(k), 'x');
      spanring::emit_record(name.c_str(), 7, 0, static_cast<int32_t>(k),
                            det::kHostBase + k * 100, 1000 - k * 100, nullptr);
    }
  } else {
    for (uint64_t i = 0; i < count; ++i) {
      if (!hold(i)) return 1;
      const det::Record r = det::record(i);
      spanring::emit_record(r.null_name ? nullptr : r.name.c_str(), r.inv, r.hid, r.depth, r.ts,
                            r.dur, r.null_attrs ? nullptr : r.attrs.c_str());
      if (pace_us != 0) {
        const struct timespec ts = {0, static_cast<long>(pace_us) * 1000};
        ::nanosleep(&ts, nullptr);
      }
    }
    if (!hold(count)) return 1;
  }
  FILE* f = std::fopen(out.c_str(), "w");
  if (f == nullptr ||
      std::fprintf(f, "{\"pid\": %d, \"tid\": %ld, \"enabled\": %d, \"count\": %llu}\n",
                   static_cast<int>(::getpid()), static_cast<long>(::syscall(SYS_gettid)),
                   spanring::enabled() ? 1 : 0, static_cast<unsigned long long>(count)) < 0 ||
      std::fclose(f) != 0) {
    std::fprintf(stderr, "det_emitter: cannot write %s: %s\n", out.c_str(), std::strerror(errno));
    return 1;
  }
  return 0;
}
