// Span times under `spanring run` (tests/mp/clock_emitter.cpp): every span's [ts, ts + dur] lies
// within the CLOCK_MONOTONIC reads the traced program took just before and after it. With an
// invariant TSC, Spans are timed in TSC ticks and the drainer converts them (format/tsc_clock.h);
// SPANRING_CLOCK=monotonic makes the producer read CLOCK_MONOTONIC, which must be exact.
#include "mp_util.h"
#include "strace_parser.h"
#include "traced_run.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdlib>
#include <map>
#include <string>

using namespace spanring_test;
using nlohmann::json;

namespace {

// Runs the emitter and checks every span; returns the largest distance (ns) by which a span
// end or start fell outside its bracket (0 when all are inside).
int64_t run_and_check(const char* clock) {
  TempDir tmp;
  if (clock != nullptr) ::setenv("SPANRING_CLOCK", clock, 1);
  else ::unsetenv("SPANRING_CLOCK");
  const EmitterRun e =
      run_emitter(tmp, "CLOCK_EMITTER", {}, {"--spans", "300", "--gap-us", "3000"}, 50);
  ::unsetenv("SPANRING_CLOCK");
  INFO("spanring run: ", e.run.describe());
  const Trace trace = load_trace(e.out);
  check_trace_invariants(trace, e.summary, e.run.err, e.out);

  std::map<uint64_t, std::pair<int64_t, int64_t>> bracket;  // i -> (before, after)
  for (const json& j : e.emitted) {
    const uint64_t first = j.at("first");
    for (size_t k = 0; k < j.at("before").size(); ++k)
      bracket[first + k] = {j.at("before")[k].get<int64_t>(), j.at("after")[k].get<int64_t>()};
  }
  REQUIRE(bracket.size() == 300);
  int64_t worst = 0;
  size_t seen = 0;
  for (const SpanLine& s : trace.spans) {
    if (s.name != "clock.check") continue;
    const auto v = attr_value(s.attrs, "i");
    REQUIRE(v.has_value());
    uint64_t i = 0;
    std::from_chars(v->data(), v->data() + v->size(), i);
    REQUIRE(bracket.count(i) == 1);
    const auto [before, after] = bracket[i];
    const int64_t ts = int64_t(s.ts), end = int64_t(s.ts + s.dur);
    worst = std::max({worst, before - ts, end - after});
    // The busy wait inside the span is (i % 7) us: the duration is at least that.
    CHECK_MESSAGE(s.dur + 100 >= (i % 7) * 1000, "span ", i, " lasted ", s.dur, " ns");
    ++seen;
  }
  CHECK(seen == 300);
  return worst;
}

}  // namespace

TEST_SUITE("mp") {

TEST_CASE("TSC-timed spans convert to within 1 us of the program's own CLOCK_MONOTONIC reads") {
  const int64_t worst = run_and_check(nullptr);
  MESSAGE("largest distance outside [before, after]: ", worst, " ns");
  CHECK(worst <= 1000);
}

TEST_CASE("with SPANRING_CLOCK=monotonic every span lies exactly within its reads") {
  CHECK(run_and_check("monotonic") <= 0);
}

}  // TEST_SUITE
