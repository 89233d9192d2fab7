// A burst at start-up, at the default settings: one thread of a program started by `spanring
// run` writes 20,000 spans as fast as it can before doing anything else. The ring the thread
// claims must hold the burst whole while the drainer is still backing off from its idle start
// (it sleeps up to 20 ms between polls), so that nothing is lost and nothing is waited for.
#include "mp_util.h"
#include "strace_parser.h"
#include "traced_run.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

using namespace spanring_test;

namespace {

constexpr uint64_t kBurst = 20000;

void check_burst(const std::vector<std::string>& run_options,
                 const std::vector<std::string>& emitter_options, const std::string& name) {
  TempDir tmp;
  const std::string out = tmp.file("burst.strace");
  std::vector<std::string> command = {exe_from_env("BURST_EMITTER"), "--count",
                                      std::to_string(kBurst)};
  command.insert(command.end(), emitter_options.begin(), emitter_options.end());
  const TracedRun r = run_traced(out, run_options, command, 30);
  const Trace trace = load_trace(out);
  check_trace_invariants(trace, r.summary, r.run.err, out);
  CHECK_MESSAGE(r.summary.dropped == 0, r.summary.dropped, " of ", kBurst,
                " spans of the start-up burst were dropped: ", r.run.err);
  CHECK(r.summary.written == kBurst);
  CHECK(trace.count(name) == kBurst);
  // Every span once, by its attribute: nothing lost, nothing written twice.
  std::set<std::string> seen;
  for (const SpanLine& s : trace.spans)
    if (const auto v = attr_value(s.attrs, "i")) seen.insert(std::string(*v));
  CHECK(seen.size() == kBurst);
}

}  // namespace

TEST_SUITE("mp") {

// No option: the default ring size and drainer pacing are what is tested. The ring holds the
// whole burst, so the drainer need not run during it (it may not get the CPU then).
TEST_CASE("a burst of 20,000 one-slot spans right after start is written whole at the defaults") {
  check_burst({}, {}, "burst.span");
}

// Two-slot spans (a name that is not a literal): the default ring holds 16,384 of them, and the
// rest of the burst is whole only when the drainer reads during it, which a loaded machine does
// not promise; a ring of 65,536 slots holds all 20,000.
TEST_CASE("a burst of 20,000 two-slot spans right after start is written whole in 65,536-slot rings") {
  check_burst({"--ring-records", "65536"}, {"--wide"}, "burst.wide.span");
}

}  // TEST_SUITE
