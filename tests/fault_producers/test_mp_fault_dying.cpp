// Producers that die (dying_emitter.cpp): short processes that return, _exit, SIGKILL
// themselves right after their last span, or SIGKILL themselves with spans open. Every span
// they published is written; every span open at the kill is reported exactly once on a
// [SPANRING_UNFINISHED] line (never as a [STRACE] record) and counted in the summary's
// unfinished=; the rings of dead processes are freed and reused: with fewer rings (16) than
// processes (200) the run has no no_ring drop, and every ring is free at the end.
#include "fault_check.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

namespace {

constexpr uint64_t kOpenDescribed = 8;  // segment_layout.h: kOpenSpanMax
constexpr uint64_t kOpenNameBytes = 32;  // segment_layout.h: OpenSpan::name

std::string unhex(const std::string& h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    s += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  }
  return s;
}

// How an open span's name must read on its [SPANRING_UNFINISHED] line. The ring keeps the first
// 32 raw bytes of the name and whether it went on; the report is the [STRACE] encoding of what
// was kept, cut (and marked `~`) when the name went on, exactly as the spec cuts a field.
std::string expected_open_name(const std::string& raw) {
  if (raw.size() > kOpenNameBytes) return spec_encode(raw.substr(0, kOpenNameBytes), true, true);
  return spec_encode(raw, true);
}

struct ExpectedOpen {
  uint64_t inv;
  std::string name;  // encoded
  int64_t ts_min;
  int64_t ts_max;
};

struct Expectations {
  std::map<std::string, std::map<uint64_t, uint64_t>> spans;  // name -> pid -> records
  std::map<std::pair<uint64_t, uint64_t>, ExpectedOpen> open;  // (pid, depth) -> open span
  std::map<uint64_t, uint64_t> undescribed;                    // pid -> spans deeper than 8
  uint64_t unfinished_total = 0;
};

Expectations expectations_of(const std::vector<json>& children) {
  Expectations e;
  for (const json& c : children) {
    const uint64_t pid = c.at("pid").get<uint64_t>();
    for (const auto& [name, n] : c.at("counts").items()) e.spans[name][pid] = n.get<uint64_t>();
    const json& open = c.at("open");
    for (const json& o : open) {
      const uint64_t depth = o.at("depth").get<uint64_t>();
      if (depth >= kOpenDescribed) continue;
      e.open[{pid, depth}] = ExpectedOpen{o.at("inv").get<uint64_t>(),
                                          expected_open_name(unhex(o.at("name_hex"))),
                                          o.at("ts_min").get<int64_t>(),
                                          o.at("ts_max").get<int64_t>()};
    }
    if (open.size() > kOpenDescribed) e.undescribed[pid] = open.size() - kOpenDescribed;
    e.unfinished_total += open.size();
  }
  return e;
}

// Unfinished lines against what was open: each expected exactly once with its name, inv, tid
// and a ts within the bounds the child took around the span's start; nothing else.
std::vector<std::string> reconcile_unfinished(const Expectations& e,
                                              const std::vector<UnfinishedLine>& lines) {
  std::vector<std::string> p;
  std::map<std::pair<uint64_t, uint64_t>, int> seen;
  std::map<uint64_t, int> seen_deeper;
  for (const UnfinishedLine& u : lines) {
    const std::string where = "pid " + std::to_string(u.pid) + " tid " + std::to_string(u.tid);
    if (u.tid != u.pid) p.push_back(where + ": unfinished span of a tid that is not the pid");
    if (!u.described) {
      ++seen_deeper[u.pid];
      const auto it = e.undescribed.find(u.pid);
      if (it == e.undescribed.end()) {
        p.push_back(where + ": undescribed=" + std::to_string(u.undescribed) +
                    " but it had no spans open deeper than 8");
      } else if (u.undescribed != it->second ||
                 u.reason != "owner_died_deeper_than_" + std::to_string(kOpenDescribed)) {
        p.push_back(where + ": undescribed=" + std::to_string(u.undescribed) + " reason=" +
                    u.reason + ", expected undescribed=" + std::to_string(it->second));
      }
      continue;
    }
    const auto key = std::make_pair(u.pid, u.depth);
    ++seen[key];
    const auto it = e.open.find(key);
    if (it == e.open.end()) {
      p.push_back(where + ": unfinished depth=" + std::to_string(u.depth) + " name=" + u.name +
                  " but nothing was open there at the kill");
      continue;
    }
    const ExpectedOpen& x = it->second;
    if (u.name != x.name) {
      p.push_back(where + " depth " + std::to_string(u.depth) + ": name=" + u.name +
                  " (" + std::to_string(u.name.size()) + " bytes), expected " + x.name + " (" +
                  std::to_string(x.name.size()) + " bytes)");
    }
    if (u.inv != x.inv) {
      p.push_back(where + " depth " + std::to_string(u.depth) + ": inv=" + std::to_string(u.inv) +
                  ", expected " + std::to_string(x.inv));
    }
    if (static_cast<int64_t>(u.ts) < x.ts_min || static_cast<int64_t>(u.ts) > x.ts_max) {
      p.push_back(where + " depth " + std::to_string(u.depth) + ": ts=" + std::to_string(u.ts) +
                  " outside [" + std::to_string(x.ts_min) + ", " + std::to_string(x.ts_max) + "]");
    }
    if (u.reason != "owner_died") p.push_back(where + ": reason=" + u.reason);
  }
  for (const auto& [key, x] : e.open) {
    const auto it = seen.find(key);
    const int n = it == seen.end() ? 0 : it->second;
    if (n != 1) {
      p.push_back("pid " + std::to_string(key.first) + " depth " + std::to_string(key.second) +
                  " (" + x.name + "): reported " + std::to_string(n) + " times, expected once");
    }
  }
  for (const auto& [pid, n] : e.undescribed) {
    if (seen_deeper[pid] != 1) {
      p.push_back("pid " + std::to_string(pid) + ": " + std::to_string(seen_deeper[pid]) +
                  " undescribed= lines, expected one");
    }
  }
  return p;
}

struct DyingRun : EmitterRun {
  TraceFacts facts;
  json coordinator;
  std::vector<json> children;
  std::map<std::string, std::map<Owner, uint64_t>> got;  // name -> (pid, tid) -> records
};

void run_dying(const TempDir& tmp, int procs, int parallel, int rings, const std::string& modes,
               DyingRun& r) {
  static_cast<EmitterRun&>(r) = run_emitter(
      tmp, "FAULT_DYING_EMITTER", {"--rings", std::to_string(rings)},
      {"--procs", std::to_string(procs), "--parallel", std::to_string(parallel), "--modes", modes},
      stress() ? 280 : 40);
  INFO("spanring run: ", r.run.describe());
  for (const json& j : r.emitted) {
    if (j.at("role") == "coordinator") {
      r.coordinator = j;
    } else {
      r.children.push_back(j);
    }
  }
  REQUIRE_MESSAGE(r.coordinator.is_object(), "no line from the coordinator");
  REQUIRE(r.children.size() == static_cast<size_t>(procs));
  r.facts = scan_trace(r.out, [&r](const SpanLine& s, uint64_t) { ++r.got[s.name][{s.pid, s.tid}]; });
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("processes that return, _exit or are SIGKILLed with spans open lose nothing, report "
          "open spans once and free their rings") {
  const int procs = stress() ? 2000 : 200;
  constexpr int kParallel = 20;
  constexpr int kRings = 16;
  TempDir tmp;
  DyingRun r;
  run_dying(tmp, procs, kParallel, kRings, "return,_exit,raise,kill,open,deep", r);
  INFO("spanring run: ", r.run.describe());
  const json& co = r.coordinator;
  INFO("coordinator: ", co.dump());

  const std::vector<std::string> inv = invariant_problems(r.facts, r.summary, r.run.err, r.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  // Each child ended the way its mode says.
  CHECK_MESSAGE(co.at("bad_status").empty(), "children that did not end as intended: ",
                co.at("bad_status").dump());

  // Every published span is written, under the child's pid and only thread.
  const Expectations e = expectations_of(r.children);
  std::set<uint64_t> child_pids;
  for (const json& c : r.children) {
    child_pids.insert(c.at("pid").get<uint64_t>());
    CHECK(c.at("tid") == c.at("pid"));
  }
  CHECK(child_pids.size() == r.children.size());
  std::vector<std::string> missing;
  for (const auto& [name, per_pid] : e.spans) {
    for (const auto& [pid, n] : per_pid) {
      const auto g = r.got.find(name);
      const uint64_t have =
          g == r.got.end() || g->second.count({pid, pid}) == 0 ? 0 : g->second.at({pid, pid});
      if (have != n) {
        missing.push_back(name + " pid " + std::to_string(pid) + ": " + std::to_string(have) +
                          " written, " + std::to_string(n) + " published");
      }
    }
  }
  for (const auto& [name, owners] : r.got) {
    for (const auto& [owner, n] : owners) {
      if (e.spans.count(name) == 0 || e.spans.at(name).count(owner.first) == 0 ||
          owner.first != owner.second) {
        missing.push_back(std::to_string(n) + " record(s) " + name + " under pid " +
                          std::to_string(owner.first) + " tid " + std::to_string(owner.second) +
                          " that were not emitted (an open span written as a record?)");
      }
    }
  }
  CHECK_MESSAGE(missing.empty(), describe(missing));

  // Open spans: reported once each, on [SPANRING_UNFINISHED] lines, and counted.
  const std::vector<std::string> unf = reconcile_unfinished(e, r.facts.unfinished);
  CHECK_MESSAGE(unf.empty(), describe(unf));
  CHECK(r.summary.unfinished == e.unfinished_total);
  CHECK(r.facts.unfinished_total() == e.unfinished_total);
  for (const char* open_name : {"die.open.outer", "die.open.inner"}) {
    CHECK_MESSAGE(r.facts.spans(open_name) == 0, open_name, " was open at the kill but is "
                  "in the trace as a record");
  }

  // Rings: 16 for 200 processes, so each was reused; none was missing, none leaked.
  CHECK_MESSAGE(r.summary.dropped == 0, "dropped=", r.summary.dropped,
                " (no_ring: ", r.facts.dropped_with_reason("no_ring"),
                "): a child found no ring although the coordinator started it only when one was "
                "free: rings of dead processes are not freed, or freed too late");
  CHECK(r.facts.drops.empty());
  CHECK(r.summary.processes == static_cast<uint64_t>(procs));
  CHECK(co.at("rings").get<uint64_t>() == static_cast<uint64_t>(kRings));
  CHECK_MESSAGE(co.at("rings_free_at_end") == co.at("rings"), "rings still taken 10 s after "
                "the last child was reaped (of pids ", co.at("rings_never_freed_of").dump(), ")");
  CHECK(co.at("still_alive").get<uint64_t>() == 0);
  const auto lat = co.at("reap_to_free_ms").get<std::vector<double>>();
  if (!lat.empty()) {
    MESSAGE(procs, " processes, ", kParallel, " at a time, ", kRings, " rings: ring freed after "
            "its owner was reaped in p50 ", lat[lat.size() / 2], " ms, p90 ",
            lat[lat.size() * 9 / 10], " ms, max ", lat.back(), " ms; the coordinator waited for "
            "a free ring before ", co.at("launch_waits").get<uint64_t>(), " launches, ",
            co.at("launch_wait_ms").get<double>(), " ms in all");
  }

  // Negative controls: an open span reported twice, or with another name, or not at all, is
  // caught.
  if (!r.facts.unfinished.empty()) {
    std::vector<UnfinishedLine> twice = r.facts.unfinished;
    twice.push_back(twice.front());
    CHECK_FALSE(reconcile_unfinished(e, twice).empty());
    std::vector<UnfinishedLine> renamed = r.facts.unfinished;
    renamed.front().name += "x";
    CHECK_FALSE(reconcile_unfinished(e, renamed).empty());
    std::vector<UnfinishedLine> lost(r.facts.unfinished.begin() + 1, r.facts.unfinished.end());
    CHECK_FALSE(reconcile_unfinished(e, lost).empty());
  }
}

TEST_CASE("an open span whose name is longer than the ring keeps is reported cut and marked") {
  TempDir tmp;
  DyingRun r;
  run_dying(tmp, 2, 2, 4, "names", r);
  INFO("spanring run: ", r.run.describe());
  const std::vector<std::string> inv = invariant_problems(r.facts, r.summary, r.run.err, r.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));
  const Expectations e = expectations_of(r.children);
  REQUIRE(e.open.size() == 8);
  // The names: 40 plain bytes -> the first 32 and `~`; exactly 32 bytes -> as is; 16 plain
  // bytes and 16 `%` (encoding to exactly the 64-byte cap) of a longer name -> the last whole
  // %25 dropped, then `~` (spec: a cut field always ends in `~`); 31 plain bytes and a `~` of
  // a longer name -> the 32 bytes and the `~` that marks the cut (the name's own `~` is not
  // a cut marker).
  for (const auto& [key, x] : e.open) {
    if (key.second == 2) {
      CHECK(x.name == "die.names.pct.x." + [] {
              std::string s;
              for (int i = 0; i < 15; ++i) s += "%25";
              return s;
            }() + "~");
    }
    if (key.second == 3) CHECK(x.name == "die.names.tilde-at-byte-32-----~~");
  }
  const std::vector<std::string> unf = reconcile_unfinished(e, r.facts.unfinished);
  CHECK_MESSAGE(unf.empty(), describe(unf));
  CHECK(r.summary.unfinished == e.unfinished_total);
}

}  // TEST_SUITE
