// burst_emitter: one thread writes N spans as fast as it can, first thing after it starts (a
// new user's first try, and the start-up case a drainer that sleeps while idle must survive).
//
//   burst_emitter [--count N] [--wide] [--rounds K --delay-ms D --rate R]
//
// Each span is `burst.span` with one integer attribute `i=<n>` (n = 0..N-1): a compact record,
// one slot, where the compiler folds the literals (this file is built with -O2). --wide gives
// every span a name and attribute text that are not literals, so each is an ordinary record of
// two slots: the same burst taking twice the ring. Nothing else runs before the first span.
//
// --rounds K: K bursts one after another, each from a new thread (a new claim of a ring) that
// first sleeps D ms (by then a drainer that saw nothing for a second sleeps its longest idle
// sleep) and then writes N spans at R spans/s (0: flat out), pacing by the clock without a
// system call; `i` runs on across rounds (0..K*N-1). The ring a thread claims must then be
// read while the burst goes on, from its first records.
#include <spanring/span.h>
#include <spanring/spanring.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <time.h>

namespace {

int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // the vDSO: no system call
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// N spans from `first` on, at `rate` spans/s (0: flat out).
void paced_burst(uint64_t first, uint64_t n, double rate) {
  const int64_t start = mono_ns();
  for (uint64_t k = 0; k < n; ++k) {
    if (rate > 0)
      while (static_cast<double>(mono_ns() - start) * rate < static_cast<double>(k) * 1e9) {
      }
    spanring::Span s{"burst.span"};
    s.attr("i", static_cast<int64_t>(first + k));
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 20000;
  bool wide = false;
  uint64_t rounds = 0;
  int64_t delay_ms = 0;
  double rate = 0;
  CLI::App app{"burst_emitter: spans as fast as one thread can write them, first thing"};
  app.add_option("--count", n, "spans per burst");
  app.add_flag("--wide", wide, "names and attributes that are not literals (two-slot records)");
  app.add_option("--rounds", rounds, "bursts, each from a new thread (0: one, from main)");
  app.add_option("--delay-ms", delay_ms, "sleep before each round's burst, ms")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rate", rate, "spans/s within a round's burst (0: flat out)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (rounds != 0) {
    for (uint64_t r = 0; r < rounds; ++r)
      std::thread([=] {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        paced_burst(r * n, n, rate);
      }).join();
    return 0;
  }
  if (!wide) {
    for (uint64_t i = 0; i < n; ++i) {
      spanring::Span s{"burst.span"};
      s.attr("i", static_cast<int64_t>(i));
    }
    return 0;
  }
  // A name read from memory the compiler cannot see into: never a literal, so never interned.
  std::string name = "burst.wide.span";
  const char* volatile name_p = name.c_str();
  for (uint64_t i = 0; i < n; ++i) {
    spanring::Span s{name_p};
    s.attr("i", static_cast<int64_t>(i));
  }
  return 0;
}
