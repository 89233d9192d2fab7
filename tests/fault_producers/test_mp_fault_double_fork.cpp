// A daemon-style grandchild (fork, setsid, fork, the middle process exits) that starts tracing
// only after the traced command itself has exited (daemon_emitter.cpp). `spanring run` makes
// itself the subreaper of everything it starts, so the grandchild is re-parented to it and the
// run must last until the grandchild is done; every grandchild record carries the grandchild's
// own pid, and the counts reconcile exactly with what each process says it emitted.
#include "fault_check.h"

#include <doctest/doctest.h>

#include <time.h>

#include <map>
#include <string>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

namespace {

int64_t mono_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Per (name, pid, tid): what the emitters said against what the trace holds. Problems if any
// name or owner differs, or the trace has a name nobody emitted.
std::vector<std::string> reconcile(const std::map<std::string, std::map<Owner, uint64_t>>& want,
                                   const std::map<std::string, std::map<Owner, uint64_t>>& got) {
  std::vector<std::string> p;
  for (const auto& [name, owners] : want) {
    const auto g = got.find(name);
    for (const auto& [owner, n] : owners) {
      const uint64_t have = g == got.end() || g->second.count(owner) == 0 ? 0 : g->second.at(owner);
      if (have != n) {
        p.push_back(name + " pid " + std::to_string(owner.first) + " tid " +
                    std::to_string(owner.second) + ": " + std::to_string(have) +
                    " records in the trace, emitted " + std::to_string(n));
      }
    }
    if (g != got.end()) {
      for (const auto& [owner, n] : g->second) {
        if (owners.count(owner) == 0) {
          p.push_back(name + ": " + std::to_string(n) + " record(s) under pid " +
                      std::to_string(owner.first) + " tid " + std::to_string(owner.second) +
                      ", which never emitted it");
        }
      }
    }
  }
  for (const auto& [name, owners] : got) {
    if (want.count(name) == 0) p.push_back(name + ": in the trace, emitted by nobody");
  }
  return p;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a setsid double-fork grandchild that traces after its parents exit is waited for "
          "and recorded under its own pid") {
  TempDir tmp;
  const EmitterRun e = run_emitter(tmp, "FAULT_DAEMON_EMITTER", {}, {"--spans", "300"}, 20);
  const int64_t returned_at = mono_now();
  INFO("spanring run: ", e.run.describe());

  // Who was who.
  std::map<std::string, json> role;
  for (const json& j : e.emitted) role[j.at("role").get<std::string>()] = j;
  REQUIRE_MESSAGE(role.count("top") == 1, "no line from top in ", e.jsonl);
  REQUIRE_MESSAGE(role.count("mid") == 1, "no line from mid in ", e.jsonl);
  REQUIRE_MESSAGE(role.count("grandchild") == 1,
                  "the grandchild wrote no line: it never ran to its end");
  const json& top = role["top"];
  const json& mid = role["mid"];
  const json& gc = role["grandchild"];
  INFO("emitters: ", top.dump(), "\n", mid.dump(), "\n", gc.dump());
  const uint64_t top_pid = top.at("pid").get<uint64_t>();
  const uint64_t mid_pid = mid.at("pid").get<uint64_t>();
  const uint64_t gc_pid = gc.at("pid").get<uint64_t>();
  CHECK(top.at("mid_pid").get<uint64_t>() == mid_pid);
  CHECK(mid.at("grandchild_pid").get<uint64_t>() == gc_pid);
  CHECK(gc.at("enabled").get<bool>());
  // The double fork really happened: mid led a new session, the grandchild is in it without
  // leading it, and it was re-parented from mid to the subreaper: `spanring run` itself.
  CHECK(mid.at("sid").get<uint64_t>() == mid_pid);
  CHECK(gc.at("sid").get<uint64_t>() == mid_pid);
  CHECK(top.at("sid").get<uint64_t>() != mid_pid);
  CHECK(gc.at("ppid_before_wait").get<uint64_t>() == mid_pid);
  const std::optional<uint64_t> run_pid = spanring_pid(e.run.err);
  REQUIRE_MESSAGE(run_pid.has_value(), "no 'spanring: segment spanring-<pid>-...' line");
  CHECK_MESSAGE(gc.at("ppid").get<uint64_t>() == *run_pid,
                "the orphaned grandchild's parent is ", gc.at("ppid").get<uint64_t>(),
                ", not `spanring run` (pid ", *run_pid, "): it is not the subreaper");
  CHECK(gc.at("segment").get<std::string>().rfind("spanring-" + std::to_string(*run_pid) + "-",
                                                  0) == 0);
  // `spanring run` returned after the grandchild finished (it waited for it): the grandchild
  // took its done time before exiting, and exiting comes before being reaped.
  CHECK_MESSAGE(returned_at > gc.at("done_mono_ns").get<int64_t>(),
                "spanring run returned before the grandchild was done");

  // Every line, the summary, then who wrote what.
  std::map<std::string, std::map<Owner, uint64_t>> got;
  const TraceFacts facts = scan_trace(e.out, [&got](const SpanLine& s, uint64_t) {
    ++got[s.name][{s.pid, s.tid}];
  });
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));
  CHECK(e.summary.dropped == 0);
  CHECK(e.summary.unfinished == 0);
  CHECK(facts.drops.empty());
  CHECK(e.summary.processes == 3);
  CHECK(e.summary.threads == 4);

  std::map<std::string, std::map<Owner, uint64_t>> want;
  for (const json* j : {&top, &mid, &gc}) {
    const uint64_t pid = j->at("pid").get<uint64_t>();
    for (const auto& [name, n] : j->at("counts").items()) {
      want[name][{pid, j->at("tids").at(name).get<uint64_t>()}] = n.get<uint64_t>();
    }
  }
  // The grandchild's main thread is the process' first thread.
  CHECK(gc.at("tids").at("daemon.grandchild").get<uint64_t>() == gc_pid);
  CHECK(gc.at("tids").at("daemon.grandchild.thread").get<uint64_t>() != gc_pid);
  const std::vector<std::string> rec = reconcile(want, got);
  CHECK_MESSAGE(rec.empty(), describe(rec));
  // Spelled out for the failure message: no grandchild record under another pid.
  for (const char* name : {"daemon.grandchild", "daemon.grandchild.thread",
                           "daemon.grandchild.outer"}) {
    for (const auto& [owner, n] : got[name]) {
      CHECK_MESSAGE(owner.first == gc_pid, n, " ", name, " record(s) under pid ", owner.first,
                    ", the grandchild is ", gc_pid, " (top ", top_pid, ", mid ", mid_pid, ")");
    }
  }

  // Negative controls: the reconciliation notices one record missing, one record under the
  // parent's pid, and a name nobody emitted.
  auto missing = got;
  --missing["daemon.grandchild"][{gc_pid, gc_pid}];
  CHECK_FALSE(reconcile(want, missing).empty());
  auto moved = got;
  ++moved["daemon.grandchild"][{mid_pid, gc_pid}];
  --moved["daemon.grandchild"][{gc_pid, gc_pid}];
  CHECK_FALSE(reconcile(want, moved).empty());
  auto extra = got;
  ++extra["daemon.ghost"][{gc_pid, gc_pid}];
  CHECK_FALSE(reconcile(want, extra).empty());
}

}  // TEST_SUITE
