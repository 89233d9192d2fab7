// `spanring run` end to end on real processes: the l3 demo (a parent with threads plus forked
// chip children) traced into a [STRACE] file, which must parse line by line with the test
// suite's own strict parser and hold exactly the spans the demo says it emitted.
#include "mp_util.h"
#include "strace_parser.h"
#include "traced_run.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <map>
#include <set>
#include <string>

using namespace spanring_test;

TEST_SUITE("mp") {

TEST_CASE("spanring run traces the l3 demo and its chip children exactly") {
  const std::string demo = exe_from_env("L3_DEMO");
  TempDir tmp;
  const std::string exp = tmp.file("exp.json");

  const TracedRun t = run_traced(tmp.file("out.strace"), {},
                                 {demo, "--rounds", "3", "--tasks", "16", "--children", "2",
                                  "--expect", exp},
                                 40);
  INFO("spanring run: ", t.run.describe());
  const Summary& summary = t.summary;
  const Trace trace = load_trace(t.out);
  check_trace_invariants(trace, summary, t.run.err, t.out);

  // A run this small must lose nothing: every ring is far larger than what one thread emits.
  CHECK_MESSAGE(summary.dropped == 0, "the drainer reported ", summary.dropped,
                " dropped records for a run of a few hundred spans at default sizes");
  CHECK_MESSAGE(trace.drops.empty(), trace.drops.size(), " [SPANRING_DROPS] line(s)");
  CHECK(summary.unfinished == 0);
  // A run that lost nothing is quiet.
  CHECK(t.run.err.find("spanring: warning:") == std::string::npos);

  // Per-name counts equal the demo's own exactly: no name missing, none extra.
  const nlohmann::json expected = nlohmann::json::parse(read_file(exp));
  REQUIRE(expected.is_object());
  REQUIRE_MESSAGE(!expected.empty(), "the demo's --expect file is empty");
  std::map<std::string, uint64_t> want;
  for (const auto& [name, count] : expected.items()) want[name] = count.get<uint64_t>();
  for (const auto& [name, count] : want) {
    const uint64_t got = trace.count(name);
    CHECK_MESSAGE(got == count, name, ": ", got, " [STRACE] lines, the demo emitted ", count);
  }
  for (const auto& [name, count] : trace.count_by_name) {
    CHECK_MESSAGE(want.count(name) == 1, name, ": ", count,
                  " [STRACE] lines of a name the demo did not emit");
  }

  // Children are separate processes: chip.* spans come from the two chip children, node.* spans
  // from the one parent, and the two sets do not meet.
  const std::set<uint64_t> node_pids = trace.pids_with_name_prefix("node.");
  const std::set<uint64_t> chip_pids = trace.pids_with_name_prefix("chip.");
  CHECK_MESSAGE(node_pids.size() == 1, "node.* spans come from ", node_pids.size(), " pids");
  CHECK_MESSAGE(chip_pids.size() == 2, "chip.* spans come from ", chip_pids.size(),
                " pids, the demo forked 2 children");
  for (const uint64_t pid : chip_pids) {
    CHECK_MESSAGE(node_pids.count(pid) == 0, "pid ", pid, " emitted both node.* and chip.* spans");
  }

  // The demo's device spans are passed through with clk=dev; every pid was anchored.
  size_t device_spans = 0;
  for (const SpanLine& s : trace.spans) device_spans += is_device_span(s) ? 1 : 0;
  CHECK_MESSAGE(device_spans > 0, "no clk=dev span in the trace");
  CHECK(trace.anchors.size() == node_pids.size() + chip_pids.size());
}

TEST_CASE("spanring run writes into a pipe (-o /dev/stdout) and into /dev/null with no false write error") {
  // fsync does not apply to pipes and character devices (EINVAL): it must not be reported as a
  // failed write, and every record must still be counted as written.
  const std::string demo = exe_from_env("L3_DEMO");
  TempDir tmp;
  for (const char* out : {"/dev/stdout", "/dev/null"}) {
    CAPTURE(out);
    const TracedRun t =
        run_traced(out, {}, {demo, "--rounds", "1", "--tasks", "8", "--children", "1"}, 40);
    INFO("spanring run: ", t.run.describe());
    CHECK(t.run.err.find("failed") == std::string::npos);
    CHECK(t.summary.written > 0);
    if (std::string(out) == "/dev/stdout") {
      // The trace went to the captured stdout (a pipe): one [STRACE] line per written record.
      size_t lines = 0;
      for (size_t at = t.run.out.find("[STRACE] "); at != std::string::npos;
           at = t.run.out.find("[STRACE] ", at + 1))
        ++lines;
      CHECK(lines == t.summary.written);
    }
  }
}

TEST_CASE("after the summary, every loss gets a warning that says what to do, counted by reason") {
  const std::string demo = exe_from_env("L3_DEMO");
  TempDir tmp;
  // 16-slot rings (the smallest): the demo's parent threads emit faster than that drains.
  const TracedRun t = run_traced(tmp.file("out.strace"), {"--ring-records", "16"},
                                 {demo, "--rounds", "4", "--tasks", "64", "--children", "1"}, 40);
  INFO("spanring run: ", t.run.describe());
  const Trace trace = load_trace(t.out);
  uint64_t ring_full = 0;
  for (const DropsLine& d : trace.drops) ring_full += d.reason == "ring_full" ? d.dropped : 0;
  CHECK(ring_full == t.summary.dropped);
  const std::string want = "spanring: warning: " + std::to_string(ring_full) +
                           " records dropped (reason ring_full): a thread's ring was full: "
                           "raise --ring-records\n";
  if (ring_full != 0)
    CHECK(t.run.err.find(want) != std::string::npos);
  else
    CHECK(t.run.err.find("spanring: warning:") == std::string::npos);
}

TEST_CASE("--fail-on-loss: exit 3 when records were lost and the command exited 0, else the command's status") {
  const std::string demo = exe_from_env("L3_DEMO");
  TempDir tmp;
  const std::vector<std::string> cmd = {demo, "--rounds", "4", "--tasks", "64", "--children", "1"};
  {
    // 16-slot rings: the demo's threads emit faster than that drains.
    const RunResult r =
        spanring_run(tmp.file("lossy.strace"), {"--fail-on-loss", "--ring-records", "16"}, cmd, 40);
    INFO("spanring run: ", r.describe());
    const std::optional<Summary> s = parse_summary(r.err);
    REQUIRE(s.has_value());
    CHECK(r.exit_code == (s->dropped != 0 ? 3 : 0));
  }
  {
    // Default rings: nothing lost, the command's own status.
    const RunResult r = spanring_run(tmp.file("whole.strace"), {"--fail-on-loss"}, cmd, 40);
    INFO("spanring run: ", r.describe());
    const std::optional<Summary> s = parse_summary(r.err);
    REQUIRE(s.has_value());
    CHECK(s->dropped == 0);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("a command that never writes a record gets a warning asking whether it is linked with libspanring") {
  TempDir tmp;
  const TracedRun t = run_traced(tmp.file("out.strace"), {}, {"/bin/true"}, 40);
  INFO("spanring run: ", t.run.describe());
  CHECK(t.summary.threads == 0);
  CHECK(t.run.err.find("spanring: warning: no thread of /bin/true wrote a record: is it linked "
                       "with libspanring, and does it keep SPANRING_SEGMENT in its "
                       "environment?\n") != std::string::npos);
}

TEST_CASE("a segment larger than /dev/shm can hold: the command runs untraced, or with --require-tracing never starts") {
  // 64 TiB: every option in range, together more than any /dev/shm holds (this used to die of
  // SIGBUS while writing the pages).
  const std::vector<std::string> huge = {"--rings", "65536", "--ring-records", "16777216"};
  TempDir tmp;
  const std::string marker = tmp.file("started");
  const std::vector<std::string> cmd = {"/bin/sh", "-c", "touch " + marker + "; exit 3"};
  struct stat st {};
  {
    // Never stop the workload: it runs without SPANRING_SEGMENT, its status passed on.
    const RunResult r = spanring_run(tmp.file("out.strace"), huge, cmd, 40);
    INFO("spanring run: ", r.describe());
    CHECK(r.exit_code == 3);
    CHECK(r.term_signal == 0);  // never SIGBUS
    CHECK(::stat(marker.c_str(), &st) == 0);
    const std::string want = "/dev/shm has ";
    CHECK(r.err.rfind("spanring: cannot trace: ", 0) == 0);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(r.err.find("running /bin/sh untraced") != std::string::npos);
    size_t lines = 0;
    for (const char c : r.err) lines += c == '\n' ? 1 : 0;
    CHECK(lines == 1);
  }
  ::unlink(marker.c_str());
  {
    std::vector<std::string> opts = huge;
    opts.push_back("--require-tracing");
    const RunResult r = spanring_run(tmp.file("out2.strace"), opts, cmd, 40);
    INFO("spanring run --require-tracing: ", r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.term_signal == 0);
    CHECK(r.err.find("/dev/shm has ") != std::string::npos);
    CHECK_MESSAGE(::stat(marker.c_str(), &st) != 0, "the command ran");
  }
}

}  // TEST_SUITE("mp")
