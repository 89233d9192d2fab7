// The segment's string table end to end: real processes under `spanring run`
// (string_emitter.cpp, built -O2 so that its literal names and keys take the compact path),
// checked against what each process says it emitted.
//
//   a producer killed mid-registration (inside intern(), test point string_writing): its entry
//     stays mid-write, other processes intern the same name and trace it, nothing is lost
//   a corrupt table: entries and record ids overwritten while the drainer runs: it never
//     crashes, drops exactly the records it cannot resolve (reason corrupt), writes the rest
//   a full table: spans go out as ordinary records, same text; stat shows strings_full
//   fork and exec: inherited ids in fork children, re-interned (same) ids after exec
#include "fault_check.h"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

namespace {

struct Emitted {
  std::map<uint64_t, std::map<std::string, uint64_t>> by_pid;  // pid -> name -> spans
  std::map<uint64_t, uint64_t> total_by_pid;
  std::map<uint64_t, uint64_t> compact_by_pid;  // compact slots seen in its rings
  uint64_t total = 0;
};

Emitted tally(const std::vector<json>& lines) {
  Emitted e;
  for (const json& j : lines) {
    const auto pid = j.at("pid").get<uint64_t>();
    for (const auto& [name, n] : j.at("emitted").items()) {
      e.by_pid[pid][name] += n.get<uint64_t>();
      e.total_by_pid[pid] += n.get<uint64_t>();
      e.total += n.get<uint64_t>();
    }
    e.compact_by_pid[pid] += j.at("compact_slots").get<uint64_t>();
  }
  return e;
}

// Every span line: a known name and the attribute text `i=<k> neg=-<k>` (`neg=0` for k = 0),
// k < count; counted per (pid, name).
struct Written {
  std::map<uint64_t, std::map<std::string, uint64_t>> by_pid;
  std::map<uint64_t, uint64_t> total_by_pid;
  uint64_t bad = 0;
};

TraceFacts scan(const EmitterRun& e, int count, Written& w) {
  static const std::set<std::string> names = {"str.a", "str.b", "str.victim", "str.doomed",
                                              "str.late", "str.fork"};
  return scan_trace(e.out, [&](const SpanLine& s, uint64_t line) {
    const std::string name = decode_field(s.name);
    const auto k = attr_u64(s, "i");
    const bool ok = names.count(name) == 1 && k.has_value() && *k < static_cast<uint64_t>(count) &&
                    s.attrs == "i=" + std::to_string(*k) + " neg=" + (*k == 0 ? "" : "-") +
                                   std::to_string(*k);
    if (!ok) {
      ++w.bad;
      if (w.bad < 10) FAIL_CHECK("line ", line, ": unexpected span ", name, " ", s.attrs);
      return;
    }
    ++w.by_pid[s.pid][name];
    ++w.total_by_pid[s.pid];
  });
}

constexpr int kCount = 300;

// One run of string_emitter's `role` (kCount spans per name) under `spanring run`, with what
// every role must show: the run's invariants hold and no line has a wrong name or wrong
// attributes.
struct RoleRun {
  EmitterRun e;
  Emitted em;
  Written w;
  TraceFacts facts;
};

RoleRun run_role(const TempDir& tmp, const char* role) {
  RoleRun r{run_emitter(tmp, "STRING_EMITTER", {},
                        {"--role", role, "--count", std::to_string(kCount)}, 60),
            {}, {}, {}};
  r.em = tally(r.e.emitted);
  r.facts = scan(r.e, kCount, r.w);
  const std::vector<std::string> inv =
      invariant_problems(r.facts, r.e.summary, r.e.run.err, r.e.out);
  CHECK_MESSAGE(inv.empty(), "role ", role, ": ", describe(inv), "\nspanring run: ",
                r.e.run.describe());
  CHECK_MESSAGE(r.w.bad == 0, "role ", role, ": ", r.w.bad,
                " lines under a wrong name or with wrong attributes");
  return r;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a producer killed while registering a string leaves its entry mid-write; other processes intern and trace on") {
  skip_without_test_points();  // the victim is killed at test point string_writing
  TempDir tmp;
  RoleRun r = run_role(tmp, "kill");
  const EmitterRun& e = r.e;
  const Emitted& em = r.em;
  Written& w = r.w;  // by_pid[] below
  const TraceFacts& facts = r.facts;
  INFO("spanring run: ", e.run.describe());
  json kill;
  for (const json& j : e.emitted)
    if (j.at("role") == "kill") kill = j;
  REQUIRE_MESSAGE(kill.is_object(), "the kill role did not report");
  INFO("kill: ", kill.dump());
  CHECK_MESSAGE(kill.at("victim_killed").get<bool>(),
                "the victim was not killed inside intern() (test point string_writing)");
  // The victim reported nothing (it died at its first registration); the others, all of it.
  for (const json& j : e.emitted) CHECK(j.at("role") != "victim");
  CHECK(em.by_pid.size() == 3);
  for (const auto& [pid, names] : em.by_pid) {
    CAPTURE(pid);
    CHECK(w.by_pid[pid] == names);
    CHECK_MESSAGE(em.compact_by_pid.at(pid) > 0, "no compact record was written by pid ", pid);
  }
  CHECK(e.summary.written == em.total);
  CHECK(e.summary.dropped == 0);
  CHECK(facts.spans("str.victim") == 3 * kCount);
  const json& strings = kill.at("stat").at("strings");
  CHECK(strings.at("writing").get<uint64_t>() == 1);  // the victim's entry, for good
  CHECK(strings.at("corrupt").get<uint64_t>() == 0);
  CHECK(strings.at("ready").get<uint64_t>() >= 5);    // 3 names, 2 keys
  CHECK(e.run.err.find("quarantined: ") == std::string::npos);
}

TEST_CASE("a corrupt table and corrupt ids: the drainer drops exactly the records it cannot resolve and writes the rest") {
  TempDir tmp;
  RoleRun r = run_role(tmp, "attack");
  const EmitterRun& e = r.e;
  const Emitted& em = r.em;
  Written& w = r.w;  // by_pid[] below
  const TraceFacts& facts = r.facts;
  INFO("spanring run: ", e.run.describe());
  json det;
  for (const json& j : e.emitted)
    if (j.value("phase", "") == "deterministic") det = j;
  REQUIRE(det.is_object());
  INFO("deterministic phase: ", det.dump());
  const uint64_t pid = det.at("pid").get<uint64_t>();
  const uint64_t tid = det.at("tid").get<uint64_t>();
  const uint64_t doomed = det.at("doomed").get<uint64_t>();
  const uint64_t spoiled = det.at("ids_spoiled").get<uint64_t>();
  CHECK(doomed == kCount);
  CHECK(spoiled > 0);
  CHECK(det.at("compact_slots").get<uint64_t>() > 0);
  // Every corrupt drop is one record, with its exact sequence number.
  std::map<Owner, uint64_t> corrupt;
  for (const DropsLine& d : facts.drops) {
    if (d.reason != "corrupt") continue;
    CHECK(d.dropped == 1);
    CHECK(d.first_seq == d.last_seq);
    corrupt[{d.pid, d.tid}] += d.dropped;
  }
  // The deterministic thread: exactly the doomed name's records and the spoiled ids.
  CHECK(corrupt[{pid, tid}] == doomed + spoiled);
  CHECK(facts.spans("str.doomed") == kCount - doomed);
  // Every record is written or dropped as corrupt (or ring_full, counted), per process.
  for (const auto& [p, total] : em.total_by_pid) {
    uint64_t dropped = 0;
    for (const auto& [owner, n] : facts.dropped_by_owner())
      if (owner.first == p) dropped += n;
    CHECK_MESSAGE(w.total_by_pid[p] + dropped == total, "pid ", p, ": written ",
                  w.total_by_pid[p], " + dropped ", dropped, " != emitted ", total);
  }
  CHECK(facts.dropped_with_reason("corrupt") ==
        e.summary.dropped - facts.dropped_with_reason("ring_full"));
  // No ring was quarantined (the drainer's per-ring line and its summary line say
  // "quarantined: "); the summary's advice for reason corrupt names both causes.
  CHECK(e.run.err.find("quarantined: ") == std::string::npos);
  CHECK(e.run.err.find("dropped as corrupt") != std::string::npos);
}

TEST_CASE("a full table: spans of names that cannot be interned go out as ordinary records, with the same text") {
  TempDir tmp;
  RoleRun r = run_role(tmp, "full");
  const EmitterRun& e = r.e;
  const Emitted& em = r.em;
  const TraceFacts& facts = r.facts;
  INFO("spanring run: ", e.run.describe());
  REQUIRE(e.emitted.size() == 1);
  const json& j = e.emitted[0];
  INFO("full: ", j.dump());
  CHECK(j.at("compact_slots").get<uint64_t>() > 0);  // str.a, before the fill
  CHECK(facts.spans("str.a") == kCount);
  CHECK(facts.spans("str.late") == kCount);  // after it: ordinary records, the same lines
  CHECK(e.summary.dropped == 0);
  CHECK(e.summary.written == em.total);
  const json& strings = j.at("stat").at("strings");
  CHECK(strings.at("full").get<uint64_t>() >= 64);
  CHECK(strings.at("ready").get<uint64_t>() > 3000);
  CHECK(strings.at("corrupt").get<uint64_t>() == 0);
}

TEST_CASE("fork and exec: children emit with inherited ids, an exec'd image re-interns the same ids") {
  TempDir tmp;
  RoleRun r = run_role(tmp, "fork");
  const EmitterRun& e = r.e;
  const Emitted& em = r.em;
  Written& w = r.w;  // by_pid[] below
  INFO("spanring run: ", e.run.describe());
  CHECK(em.by_pid.size() == 4);  // the parent, two fork children, the exec'd image
  for (const auto& [pid, names] : em.by_pid) {
    if (names.empty()) continue;
    CAPTURE(pid);
    CHECK(w.by_pid[pid] == names);
    CHECK_MESSAGE(em.compact_by_pid.at(pid) > 0, "no compact record was written by pid ", pid);
  }
  CHECK(e.summary.dropped == 0);
  CHECK(e.summary.written == em.total);
  // One entry per name: the exec'd image found the same ids (content-addressed).
  const auto usage = [&] {
    for (const json& j : e.emitted)
      if (j.at("role") == "fork-ids") return j.at("ids");
    return json();
  }();
  REQUIRE(usage.is_object());
  for (const auto& [name, id] : usage.items()) CHECK_MESSAGE(id.get<uint64_t>() != 0, name);
}

}  // TEST_SUITE
