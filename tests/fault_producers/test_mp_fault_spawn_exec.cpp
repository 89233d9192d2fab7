// Children started by posix_spawn, by vfork+execve and by system() (spawn_emitter.cpp): each
// exec'd child attaches to the segment from its environment and its spans carry its own pid;
// the spans a vfork child emits before execve (on its parent's memory) are never written into
// the parent's ring but reported as one segment-wide drop line with reason=vfork; counts
// reconcile exactly.
#include "fault_check.h"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

namespace {

// The vfork child's pre-exec spans: none of them in the trace under any pid, all of them counted
// on reason=vfork drop lines.
std::vector<std::string> vfork_problems(
    const std::map<std::string, std::map<Owner, uint64_t>>& got, const json& pre_exec_names,
    uint64_t vfork_dropped, uint64_t vfork_lines, uint64_t pre_exec) {
  std::vector<std::string> p;
  for (const auto& name : pre_exec_names) {
    const auto it = got.find(name.get<std::string>());
    if (it == got.end()) continue;
    for (const auto& [owner, n] : it->second) {
      p.push_back(std::to_string(n) + " record(s) " + name.get<std::string>() + " under pid " +
                  std::to_string(owner.first) + " tid " + std::to_string(owner.second) +
                  ": emitted by the vfork child before execve, on its parent's memory");
    }
  }
  if (vfork_lines == 0) p.push_back("no [SPANRING_DROPS] line with reason=vfork");
  if (vfork_dropped != pre_exec) {
    p.push_back("vfork drops reported: " + std::to_string(vfork_dropped) + ", the vfork child "
                "emitted " + std::to_string(pre_exec) + " spans before execve");
  }
  return p;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("posix_spawn, vfork+execve and system() children trace under their own pids and a "
          "vfork child's spans before exec are dropped as reason=vfork") {
  TempDir tmp;
  const EmitterRun e = run_emitter(tmp, "FAULT_SPAWN_EMITTER", {}, {"--spans", "150"}, 20);
  INFO("spanring run: ", e.run.describe());

  json parent;
  std::map<std::string, json> child;  // how -> line
  for (const json& j : e.emitted) {
    if (j.at("role") == "parent") {
      parent = j;
    } else {
      CHECK_MESSAGE(child.count(j.at("how").get<std::string>()) == 0, "two children ",
                    j.at("how").get<std::string>());
      child[j.at("how").get<std::string>()] = j;
    }
  }
  REQUIRE_MESSAGE(parent.is_object(), "no line from the parent");
  INFO("parent: ", parent.dump());
  const uint64_t parent_pid = parent.at("pid").get<uint64_t>();
  for (const char* how : {"posix_spawn", "vfork", "system"}) {
    REQUIRE_MESSAGE(child.count(how) == 1, "no line from the ", how, " child");
    CHECK_MESSAGE(child[how].at("enabled").get<bool>(), "the ", how,
                  " child did not attach from SPANRING_SEGMENT in its environment");
    CHECK(child[how].at("pid").get<uint64_t>() != parent_pid);
    CHECK(child[how].at("tid").get<uint64_t>() == child[how].at("pid").get<uint64_t>());
  }
  // The exec'd image runs in the process vfork/posix_spawn created.
  CHECK(child["posix_spawn"].at("pid") == parent.at("children").at("posix_spawn"));
  CHECK(child["vfork"].at("pid") == parent.at("children").at("vfork"));

  std::map<std::string, std::map<Owner, uint64_t>> got;
  const TraceFacts facts = scan_trace(e.out, [&got](const SpanLine& s, uint64_t) {
    ++got[s.name][{s.pid, s.tid}];
  });
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  // Exact counts, per name and per (pid, tid).
  std::map<std::string, std::map<Owner, uint64_t>> want;
  want["spawn.parent"][{parent_pid, parent.at("tid").get<uint64_t>()}] =
      parent.at("counts").at("spawn.parent").get<uint64_t>();
  uint64_t emitted = want["spawn.parent"].begin()->second;
  for (const auto& [how, j] : child) {
    for (const auto& [name, n] : j.at("counts").items()) {
      want[name][{j.at("pid").get<uint64_t>(), j.at("tid").get<uint64_t>()}] = n.get<uint64_t>();
      emitted += n.get<uint64_t>();
    }
  }
  for (const auto& [name, owners] : want) {
    for (const auto& [owner, n] : owners) {
      const uint64_t have = got[name][owner];
      CHECK_MESSAGE(have == n, name, " pid ", owner.first, " tid ", owner.second, ": ", have,
                    " records, emitted ", n);
    }
  }
  for (const auto& [name, owners] : got) {
    for (const auto& [owner, n] : owners) {
      const bool expected = want.count(name) != 0 && want.at(name).count(owner) != 0;
      CHECK_MESSAGE(expected, n, " record(s) ", name, " under pid ", owner.first, " tid ",
                    owner.second, ", which did not emit them");
    }
  }

  // The vfork child's pre-exec spans: not in the file under any pid, counted as vfork drops.
  const uint64_t pre_exec = parent.at("vfork_pre_exec_emits").get<uint64_t>();
  const json& pre_names = parent.at("vfork_pre_exec_names");
  const std::vector<std::string> vp =
      vfork_problems(got, pre_names, facts.dropped_with_reason("vfork"),
                     facts.drop_lines_with_reason("vfork"), pre_exec);
  CHECK_MESSAGE(vp.empty(), describe(vp));
  for (const DropsLine& d : facts.drops) {
    if (d.reason != "vfork") continue;
    CHECK(d.pid == 0);
    CHECK(d.tid == 0);
  }
  CHECK_MESSAGE(e.summary.dropped == pre_exec, "dropped=", e.summary.dropped,
                ": only the vfork child's pre-exec spans may be dropped");
  CHECK(e.summary.written + e.summary.dropped == emitted + pre_exec);
  CHECK(e.summary.unfinished == 0);
  CHECK(e.summary.processes == 4);

  // Negative controls: a pre-exec record in the parent's ring (what happens without the vfork
  // guard), one vfork drop fewer, or no vfork line at all are each caught.
  auto leaked = got;
  ++leaked["spawn.vfork.before_exec"][{parent_pid, parent.at("tid").get<uint64_t>()}];
  CHECK_FALSE(vfork_problems(leaked, pre_names, pre_exec, 1, pre_exec).empty());
  CHECK_FALSE(vfork_problems(got, pre_names, pre_exec - 1, 1, pre_exec).empty());
  CHECK_FALSE(vfork_problems(got, pre_names, pre_exec, 0, pre_exec).empty());
}

}  // TEST_SUITE
