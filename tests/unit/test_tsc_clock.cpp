// TscClock (format/tsc_clock.h): TSC ticks to CLOCK_MONOTONIC ns from sample pairs.
#include "format/tsc_clock.h"

#include <doctest/doctest.h>

#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <vector>

using spanring::TscClock;
using Pair = TscClock::Pair;

TEST_SUITE("unit") {

TEST_CASE("ticks between samples interpolate on that interval's own rate") {
  // 2 ticks per ns up to tick 2000, then 4 ticks per ns (a clock slewed in between).
  TscClock c({{1000, 500}, {2000, 1000}, {6000, 2000}});
  const Pair none{0, 0};
  CHECK(c.to_ns(1000, none) == 500);
  CHECK(c.to_ns(1500, none) == 750);
  CHECK(c.to_ns(2000, none) == 1000);
  CHECK(c.to_ns(4000, none) == 1500);
  CHECK(c.to_ns(5999, none) == 1999);  // 1999.75, rounded down
}

TEST_CASE("ticks outside the samples extrapolate at the first-to-last rate, saturating") {
  TscClock c({{1000, 500}, {3000, 1500}});  // 2 ticks per ns
  const Pair none{0, 0};
  CHECK(c.to_ns(5000, none) == 2500);
  CHECK(c.to_ns(0, none) == 0);
  CHECK(c.to_ns(600, none) == 300);
  CHECK(c.to_ns(UINT64_MAX, none) > c.to_ns(UINT64_MAX / 2, none));
}

TEST_CASE("a process' own pair is used when nearer, and no span starts before it") {
  TscClock c({{1000, 500}, {3000, 1500}});
  // The process attached at tick 2000 when its clock read 1004 (the samples say 1000).
  const Pair anchor{2000, 1004};
  CHECK(c.to_ns(2000, anchor) == 1004);
  CHECK(c.to_ns(2500, anchor) >= 1004);
  CHECK(c.to_ns(3000, anchor) == 1500);  // from the anchor to the next sample
  // Before the anchor (not a Span of this process), the samples alone.
  CHECK(c.to_ns(1500, anchor) == 750);
  const TscClock::Interval s = c.span_ns(2000, 1000, anchor);
  CHECK(s.start_ns == 1004);
  CHECK(s.dur_ns == 496);
}

TEST_CASE("samples that do not rise are ignored; a full table keeps its span at half resolution") {
  TscClock c({{1000, 1000}, {2000, 2000}});
  c.add({1500, 3000});  // earlier tick: ignored
  c.add({3000, 1500});  // earlier ns: ignored
  CHECK(c.to_ns(3000, {0, 0}) == 3000);
  for (uint64_t k = 3; k < 3 * TscClock::kMaxSamples; ++k) c.add({k * 1000, k * 1000});
  const uint64_t last = (3 * TscClock::kMaxSamples - 1) * 1000;
  CHECK(c.to_ns(1000, {0, 0}) == 1000);
  CHECK(c.to_ns(last, {0, 0}) == last);
  CHECK(c.to_ns(last / 2 + 7, {0, 0}) == last / 2 + 7);
  CHECK(c.rate_fixed() == (uint64_t{1} << 32));  // 1 ns per tick
}

TEST_CASE("the live clock converts a fresh TSC reading close to CLOCK_MONOTONIC") {
  if (!TscClock::available()) return;
#if defined(__x86_64__)
  TscClock c;
  CHECK(c.rate_fixed() > 0);
  for (int k = 0; k < 3; ++k) {
    timespec pause{0, 3'000'000};
    nanosleep(&pause, nullptr);
    c.maybe_sample();
    const uint64_t a = __rdtsc();
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t b = __rdtsc();
    const int64_t mono = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    const int64_t got = int64_t(c.to_ns(a + (b - a) / 2, {0, 0}));
    // Extrapolated over ~3 ms from a 2 ms baseline: well within 20 us even on a noisy VM.
    CHECK_MESSAGE(std::llabs(got - mono) < 20'000, "converted ", got, " vs clock ", mono);
  }
#endif
}

}  // TEST_SUITE

TEST_CASE("span_ns is both ends through to_ns, past the last sample and before it, any anchor") {
  // span_ns takes a shortcut past the last sample; it must agree with to_ns everywhere.
  const TscClock c({{1'000'000, 500'000}, {3'000'000, 1'500'100}, {5'000'000, 2'500'000}});
  const TscClock::Pair anchors[] = {{0, 0},
                                    {2'000'000, 1'000'000},
                                    {6'000'000, 3'000'000},
                                    {6'000'000, 9'000'000'000},  // an anchor ns far ahead
                                    {9'000'000, 4'500'000}};
  const uint64_t ticks[] = {0,         999'999,   1'000'000, 4'000'000, 4'999'999,
                            5'000'000, 5'000'001, 6'000'000, 8'999'999, 9'000'000,
                            50'000'000, UINT64_MAX - 10};
  const uint64_t durs[] = {0, 1, 777, 3'000'000, 20};
  for (const auto& a : anchors)
    for (const uint64_t t : ticks)
      for (const uint64_t d : durs) {
        const TscClock::Interval iv = c.span_ns(t, d, a);
        const uint64_t start = c.to_ns(t, a);
        const uint64_t end = c.to_ns(t + d < t ? UINT64_MAX : t + d, a);
        CHECK(iv.start_ns == start);
        CHECK(iv.dur_ns == (end > start ? end - start : 0));
      }
}

TEST_CASE("Spans (a reader's run) gives span_ns exactly: every path, random clocks, thinned ones") {
  // TscClock::Spans precomputes a run's common cases (past the last sample in 64-bit or 128-bit
  // products, between the last two samples, inline in 64-bit products or not); the binary reader
  // and the text drainer convert with it, so it must agree with span_ns for any tick, duration
  // and anchor.
  std::mt19937_64 rng(2323);
  for (int round = 0; round < 40; ++round) {
    TscClock c(TscClock::Replay{});
    uint64_t tsc = 1'000'000 + rng() % 1'000'000;
    uint64_t ns = rng() % 2 ? rng() % 1'000'000 : UINT64_MAX - (uint64_t{1} << 33);
    const int n = round < 4 ? 4'500 : 1 + static_cast<int>(rng() % 40);  // thinned when 4,500
    // ~3 ticks per ns, or ~0.3 (a slow counter: the 128-bit way), with jitter.
    const bool slow_counter = round % 5 == 4;
    for (int i = 0; i < n; ++i) {
      const uint64_t dt = slow_counter ? 3'000'000 : 30'000'000 + rng() % 1'000'000;
      tsc += dt;
      ns += slow_counter ? 10'000'000 : 10'000'000 - 500 + rng() % 1'000;
      if (ns < 1'000) ns = 1'000;
      c.add(TscClock::Pair{tsc, ns});
    }
    const std::vector<TscClock::Pair>& s = c.samples();
    for (int k = 0; k < 400; ++k) {
      const TscClock::Pair pick = s[rng() % s.size()];
      const TscClock::Pair anchors[] = {{0, 0},
                                        {pick.tsc, pick.ns},
                                        {pick.tsc + 1 + rng() % 5'000, pick.ns + rng() % 3'000},
                                        {s.back().tsc + rng() % 9'000, s.back().ns + 700},
                                        {s.back().tsc - 1, s.back().ns + 5'000'000},
                                        {1, 0}};
      const TscClock::Pair a = anchors[rng() % 6];
      const TscClock::Spans spans(c, a);
      for (int j = 0; j < 8; ++j) {
        // The last sample, the one before it (spans between the two, and across the last: the
        // second inline case) or any.
        const int which = static_cast<int>(rng() % 4);
        const uint64_t base = which == 0                     ? s.back().tsc
                              : which == 1 && s.size() >= 2 ? s[s.size() - 2].tsc
                                                             : s[rng() % s.size()].tsc;
        const uint64_t offsets[] = {0, 1, rng() % 40'000'000, (uint64_t{1} << 32) + rng() % 9,
                                    uint64_t(0) - 1 - rng() % 1'000};
        const uint64_t t = base + offsets[rng() % 5];
        const uint64_t durs[] = {0, 1, rng() % 90'000'000, (uint64_t{1} << 32) - 1,
                                 UINT64_MAX - rng() % 3};
        const uint64_t d = durs[rng() % 5];
        const TscClock::Interval want = c.span_ns(t, d, a);
        const TscClock::Interval got = spans(t, d);
        CHECK(got.start_ns == want.start_ns);
        CHECK(got.dur_ns == want.dur_ns);
      }
    }
  }
}

TEST_CASE("a replayed clock: add() of the same samples gives the same samples, thinning included") {
  TscClock drainer({{100, 10}, {400, 110}});
  TscClock reader(TscClock::Replay{});
  for (const TscClock::Pair& p : drainer.samples()) reader.add(p);
  for (uint64_t i = 0; i < 9'000; ++i) {
    const TscClock::Pair p{drainer.samples().back().tsc + 300 + i % 7,
                           drainer.samples().back().ns + 100};
    CHECK(drainer.add(p));
    CHECK(reader.add(p));
    CHECK_FALSE(reader.add(p));  // not rising: ignored alike
  }
  REQUIRE(drainer.samples().size() == reader.samples().size());
  CHECK(drainer.samples().size() < TscClock::kMaxSamples);
  for (size_t i = 0; i < drainer.samples().size(); ++i) {
    CHECK(drainer.samples()[i].tsc == reader.samples()[i].tsc);
    CHECK(drainer.samples()[i].ns == reader.samples()[i].ns);
  }
  reader.clear();
  CHECK(reader.samples().empty());
  CHECK(reader.to_ns(500, TscClock::Pair{400, 77}) == 77);  // no sample: the anchor's ns
  CHECK(reader.to_ns(300, TscClock::Pair{400, 77}) == 0);
}
