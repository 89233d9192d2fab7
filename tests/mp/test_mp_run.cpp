// `spanring run` end to end on real processes: the l3 demo (a parent with threads plus forked
// chip children) traced into a [STRACE] file, which must parse line by line with the test
// suite's own strict parser and hold exactly the spans the demo says it emitted.
#include "mp_util.h"
#include "strace_parser.h"
#include "traced_run.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <map>
#include <tuple>
#include <set>
#include <string>

using namespace spanring_test;

TEST_SUITE("mp") {

// The attributes of a span line as a map (`k=v` tokens separated by single spaces).
std::map<std::string, std::string> attr_map(const std::string& attrs) {
  std::map<std::string, std::string> m;
  size_t at = 0;
  while (at < attrs.size()) {
    size_t end = attrs.find(' ', at);
    if (end == std::string::npos) end = attrs.size();
    const std::string tok = attrs.substr(at, end - at);
    const size_t eq = tok.find('=');
    if (eq != std::string::npos) m[tok.substr(0, eq)] = tok.substr(eq + 1);
    at = end + 1;
  }
  return m;
}

TEST_CASE("the demo's spans read as the [STRACE] tool reads span families: a submit->dispatch pair per task, lanes named by role") {
  // Written from shared/strace-format.md, "Span families": the first word of a name is the
  // family; node.* is the L3 scheduler, per task, inv=0 hid=0, with role facade (submit),
  // scheduler (dispatch) or worker (complete); a flow joins a node.submit to the first later
  // node.dispatch with the same (pid, run_id, task_slot); a lane is named "orchestrator /
  // facade", "scheduler" or "worker N" from the roles on it; chip.run is depth 0 with its own
  // inv and the callable's hid. l3.* is no longer recognised.
  const std::string demo = exe_from_env("L3_DEMO");
  TempDir tmp;
  const uint32_t rounds = 3, tasks = 16, workers = 2;
  const TracedRun t = run_traced(tmp.file("out.strace"), {},
                                 {demo, "--rounds", std::to_string(rounds), "--tasks",
                                  std::to_string(tasks), "--workers", std::to_string(workers)},
                                 40);
  INFO("spanring run: ", t.run.describe());
  REQUIRE(t.summary.dropped == 0);
  const Trace trace = load_trace(t.out);

  struct Lane {
    std::set<std::string> roles;
    std::set<std::string> worker_ids;
  };
  std::map<std::pair<uint64_t, uint64_t>, Lane> lanes;  // (pid, tid) of node.* spans
  // (pid, run_id, task_slot) -> ts of the submits and dispatches, in file order.
  using Key = std::tuple<uint64_t, std::string, std::string>;
  std::map<Key, std::vector<uint64_t>> submits, dispatches;
  std::map<std::string, std::string> dispatch_worker;  // dispatch_id -> worker_id
  std::map<std::string, std::string> complete_worker;
  for (const SpanLine& s : trace.spans) {
    const std::string family = s.name.substr(0, s.name.find('.'));
    CHECK_MESSAGE((family == "node" || family == "chip"), "a span of family ", family, ": ",
                  s.name);
    const auto a = attr_map(s.attrs);
    if (family == "chip") {
      if (s.name == "chip.run") {
        CHECK(s.depth == 0);
        CHECK(s.inv != 0);
        CHECK(s.hid != 0);
      }
      continue;
    }
    CAPTURE(s.name);
    CAPTURE(s.attrs);
    CHECK(s.inv == 0);  // per task, not per run
    CHECK(s.hid == 0);
    REQUIRE(a.count("role") == 1);
    Lane& lane = lanes[{s.pid, s.tid}];
    lane.roles.insert(a.at("role"));
    const std::string leaf = s.name.substr(5);
    if (leaf == "graph_build") {
      CHECK(a.at("role") == "facade");
    } else if (leaf == "submit") {
      CHECK(a.at("role") == "facade");
      submits[{s.pid, a.at("run_id"), a.at("task_slot")}].push_back(s.ts);
    } else if (leaf == "dispatch") {
      CHECK(a.at("role") == "scheduler");
      dispatches[{s.pid, a.at("run_id"), a.at("task_slot")}].push_back(s.ts);
      dispatch_worker[a.at("dispatch_id")] = a.at("worker_id");
    } else if (leaf == "complete") {
      CHECK(a.at("role") == "worker");
      lane.worker_ids.insert(a.at("worker_id"));
      complete_worker[a.at("dispatch_id")] = a.at("worker_id");
    } else {
      FAIL_CHECK("a node.* leaf the demo does not write: ", s.name);
    }
  }

  // A flow for every task: each submit has a later dispatch with the same key.
  CHECK(submits.size() == rounds * tasks);
  CHECK(dispatches.size() == rounds * tasks);
  for (const auto& [key, ts] : submits) {
    CAPTURE(std::get<1>(key));
    CAPTURE(std::get<2>(key));
    REQUIRE(ts.size() == 1);
    const auto d = dispatches.find(key);
    REQUIRE_MESSAGE(d != dispatches.end(), "a node.submit with no node.dispatch");
    REQUIRE(d->second.size() == 1);
    CHECK_MESSAGE(d->second[0] > ts[0], "the dispatch starts before its submit");
  }
  // complete names the worker its dispatch targeted.
  CHECK(complete_worker == dispatch_worker);

  // Lanes: one role each, named as the tool names them.
  std::multiset<std::string> names;
  for (const auto& [pt, lane] : lanes) {
    REQUIRE_MESSAGE(lane.roles.size() == 1, "lane tid ", pt.second, " has ", lane.roles.size(),
                    " roles");
    const std::string role = *lane.roles.begin();
    if (role == "facade") {
      names.insert("orchestrator / facade");
    } else if (role == "scheduler") {
      names.insert("scheduler");
    } else {
      REQUIRE(lane.worker_ids.size() == 1);
      names.insert("worker " + *lane.worker_ids.begin());
    }
  }
  CHECK(names == std::multiset<std::string>{"orchestrator / facade", "scheduler", "worker 0",
                                            "worker 1"});
}

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

TEST_CASE("report reads at a glance on a lossy run: clock, window, counts first; drops folded per thread; threads labelled") {
  // 16-slot rings: the demo's parent threads drop records in many separate ranges.
  const std::string spanring = exe_from_env("SPANRING_EXE");
  const std::string demo = exe_from_env("L3_DEMO");
  TempDir tmp;
  const std::string text = tmp.file("lossy.strace");
  const std::string binary = tmp.file("lossy.sptrace");
  const RunResult run = run_process({spanring, "run", "--format", "binary", "-o", binary,
                                     "--also-strace", text, "--ring-records", "16", "--", demo,
                                     "--rounds", "20", "--tasks", "64", "--children", "1"});
  INFO("spanring run: ", run.describe());
  REQUIRE(run.exit_code == 0);
  const std::optional<Summary> summary = parse_summary(run.err);
  REQUIRE(summary.has_value());
  const Trace trace = load_trace(text);

  // What the report must say, computed here from the [STRACE] lines.
  uint64_t first_ts = UINT64_MAX, last_end = 0, first_pid = 0;
  for (const SpanLine& sp : trace.spans) {
    if (is_device_span(sp)) continue;
    if (sp.ts < first_ts) {
      first_ts = sp.ts;
      first_pid = sp.pid;
    }
    last_end = std::max(last_end, sp.ts + sp.dur);
  }
  REQUIRE(first_ts != UINT64_MAX);
  uint64_t wall = 0;
  for (const AnchorLine& a : trace.anchors)
    if (a.pid == first_pid) wall = a.wall_ns + (first_ts - a.mono_ns);
  REQUIRE(wall != 0);
  const time_t sec = static_cast<time_t>(wall / 1000000000u);
  struct tm tm {};
  gmtime_r(&sec, &tm);
  char utc[64];
  const size_t n = std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(utc + n, sizeof utc - n, ".%09uZ", static_cast<unsigned>(wall % 1000000000u));
  struct Folded {
    uint64_t dropped = 0, ranges = 0, first = UINT64_MAX, last = 0;
  };
  std::map<std::pair<uint64_t, uint64_t>, Folded> folded;
  for (const DropsLine& d : trace.drops) {
    REQUIRE(d.reason == "ring_full");
    Folded& f = folded[{d.pid, d.tid}];
    f.dropped += d.dropped;
    ++f.ranges;
    f.first = std::min(f.first, d.first_seq);
    f.last = std::max(f.last, d.last_seq);
  }
  if (trace.drops.size() <= folded.size()) {
    MESSAGE("no thread dropped in more than one range this run (", trace.drops.size(),
            " drop lines): nothing to fold");
  }

  for (const std::string& file : {text, binary}) {
    CAPTURE(file);
    const RunResult rep = run_process({spanring, "report", file});
    INFO("report: ", rep.describe());
    REQUIRE(rep.exit_code == 0);
    std::vector<std::string> lines;
    for (size_t at = 0; at < rep.out.size();) {
      const size_t nl = rep.out.find('\n', at);
      lines.push_back(rep.out.substr(at, nl - at));
      at = nl + 1;
    }
    REQUIRE(lines.size() > 4);
    CHECK(lines[0].rfind("spanring report: " + file + " (", 0) == 0);
    CHECK(lines[1] == "clock: host spans CLOCK_MONOTONIC ns, tables in us; clk=dev spans "
                      "device-clock ns, in a table of their own");
    CHECK(lines[2].rfind("window: ts " + std::to_string(first_ts) + " .. " +
                             std::to_string(last_end) + " (", 0) == 0);
    CHECK(lines[2].find("), starting " + std::string(utc) +
                        " (wall clock, from the clock anchors)") != std::string::npos);
    CHECK(lines[3] == "processes: " + std::to_string(summary->processes) +
                          "  threads: " + std::to_string(summary->threads) +
                          "  records: " + std::to_string(summary->written) + "  lost: " +
                          std::to_string(summary->dropped) + " dropped, 0 unfinished");

    // Drops: one line per thread, however many ranges it lost.
    std::vector<std::string> drop_lines;
    bool in_drops = false;
    for (const std::string& l : lines) {
      if (l == "drops (records that are not in the trace), per thread:") {
        in_drops = true;
        continue;
      }
      if (in_drops && l.rfind("  ", 0) != 0) break;
      if (in_drops) drop_lines.push_back(l);
    }
    CHECK(drop_lines.size() == folded.size());
    for (const auto& [pt, f] : folded) {
      const std::string head = "  pid " + std::to_string(pt.first) + " tid " +
                               std::to_string(pt.second) + " (";
      const std::string tail = "): " + std::to_string(f.dropped) + " record(s) in " +
                               std::to_string(f.ranges) + " range(s), seq " +
                               std::to_string(f.first) + ".." + std::to_string(f.last) +
                               ", reason ring_full (the ring was full)";
      size_t found = 0;
      for (const std::string& l : drop_lines)
        if (l.rfind(head, 0) == 0 && l.size() > tail.size() &&
            l.compare(l.size() - tail.size(), tail.size(), tail) == 0)
          ++found;
      CHECK_MESSAGE(found == 1, head, "...", tail);
    }

    // The thread column: the lane each node.* thread's role names; the binary trace also has
    // the kernel's thread name.
    const bool is_binary = file == binary;
    for (const std::string label : {"orchestrator / facade", "scheduler", "worker 0",
                                    "worker 1"}) {
      const std::string want = is_binary ? "[" + label + "]" : "  " + label + "  ";
      CHECK_MESSAGE(rep.out.find(want) != std::string::npos, "no thread labelled ", want);
    }
    if (is_binary) CHECK(rep.out.find("l3-sched [scheduler]") != std::string::npos);
    // The command line column: what the trace recorded for each process (a binary trace has
    // none for a process that exited before the drainer read /proc/PID/cmdline).
    const RunResult js = run_process({spanring, "report", "--json", file});
    REQUIRE(js.exit_code == 0);
    const nlohmann::json report = nlohmann::json::parse(js.out);
    for (const nlohmann::json& p : report.at("by_process")) {
      const std::string cmdline = p["cmdline"];
      if (p["pid"] == 0) continue;
      CAPTURE(p["pid"].get<uint64_t>());
      if (!is_binary) CHECK(cmdline.empty());
      const std::string want = !cmdline.empty() ? "  " + cmdline + "\n"
                               : is_binary      ? "  (command line not recorded) spans: "
                                                : "  (no command line in [STRACE] text) spans: ";
      CHECK(rep.out.find(std::to_string(p["pid"].get<uint64_t>())) != std::string::npos);
      CHECK(rep.out.find(want) != std::string::npos);
    }
  }
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

}  // TEST_SUITE("mp")
