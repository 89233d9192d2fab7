// fork() from a non-main thread while other threads emit (tests/mp/fork_emitter.cpp under
// `spanring run`): a child never writes into a ring it inherited, every record carries the pid
// and tid of the process and thread that made it, no ring has two producers, and the counts
// reconcile exactly with what the emitter says it emitted.
#include "mp_util.h"
#include "strace_parser.h"
#include "traced_run.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace spanring_test;

namespace {

std::optional<uint64_t> seq_of(const SpanLine& s) {
  const auto v = attr_value(s.attrs, "seq");
  if (!v) return std::nullopt;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size()) return std::nullopt;
  return n;
}

}  // namespace

TEST_SUITE("mp") {

TEST_CASE("spans forked from a non-main thread carry the child's pid and never share a ring") {
  TempDir tmp;
  std::vector<std::string> emitter_args;
  // The stress variant: far more records than a default ring holds, so drops are expected and
  // must be accounted exactly, thread by thread.
  if (stress()) {
    emitter_args = {"--children", "8", "--child-spans", "20000", "--parent-cap", "200000",
                    "--tight", "1"};
  }
  const EmitterRun e = run_emitter(tmp, "FORK_EMITTER", {}, emitter_args, stress() ? 240 : 40);
  INFO("spanring run: ", e.run.describe());
  const Summary& summary = e.summary;
  const std::string& out = e.out;
  const Trace trace = load_trace(out);
  check_trace_invariants(trace, summary, e.run.err, out);
  CHECK(summary.unfinished == 0);

  REQUIRE(e.emitted.size() == 1);
  const nlohmann::json& emitted = e.emitted[0];
  const uint64_t parent_pid = emitted.at("parent_pid").get<uint64_t>();
  std::set<uint64_t> child_pids;
  for (const auto& p : emitted.at("child_pids")) child_pids.insert(p.get<uint64_t>());
  REQUIRE(child_pids.size() == emitted.at("child_pids").size());
  REQUIRE(child_pids.count(parent_pid) == 0);
  const uint64_t per_child_thread = emitted.at("child_spans_per_thread").get<uint64_t>();
  const uint64_t child_threads = emitted.at("child_threads").get<uint64_t>();
  std::map<std::string, uint64_t> parent_tid_of;
  for (const auto& [name, tid] : emitted.at("parent_tids").items()) {
    parent_tid_of[name] = tid.get<uint64_t>();
  }
  INFO("parent pid ", parent_pid, ", emitted: ", emitted.dump());

  // Who made each record, and in what order each (pid, tid) wrote its seq numbers.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint64_t>> seqs;  // (pid, tid) -> seq
  std::map<std::pair<uint64_t, uint64_t>, std::string> name_of_owner;
  std::map<uint64_t, std::set<uint64_t>> child_tids;  // child pid -> tids seen
  size_t wrong_pid = 0;
  size_t wrong_tid = 0;
  size_t mixed_owner = 0;
  size_t missing_seq = 0;
  std::string first_problem;
  const auto problem = [&first_problem](size_t& counter, const std::string& what) {
    if (counter++ == 0) first_problem += what + "\n";
  };
  for (const SpanLine& s : trace.spans) {
    const std::string where =
        s.name + " pid=" + std::to_string(s.pid) + " tid=" + std::to_string(s.tid);
    if (s.name == "fork.child") {
      if (child_pids.count(s.pid) == 0) {
        problem(wrong_pid, where + ": fork.child from a pid that is not a child" +
                               (s.pid == parent_pid ? " (the parent's pid!)" : ""));
      }
      child_tids[s.pid].insert(s.tid);
    } else if (s.name.rfind("fork.parent.", 0) == 0) {
      if (s.pid != parent_pid) problem(wrong_pid, where + ": parent span from another pid");
      const auto t = parent_tid_of.find(s.name);
      if (t == parent_tid_of.end() || t->second != s.tid) {
        problem(wrong_tid, where + ": not the tid of the thread that emits " + s.name);
      }
    } else {
      problem(wrong_pid, where + ": a name the emitter never uses");
    }
    // One (pid, tid) = one producer thread = one name (every emitting thread uses one name).
    const auto owner = std::make_pair(s.pid, s.tid);
    const auto [it, inserted] = name_of_owner.emplace(owner, s.name);
    if (!inserted && it->second != s.name) {
      problem(mixed_owner, where + ": the same (pid, tid) also wrote " + it->second);
    }
    const auto seq = seq_of(s);
    if (!seq) {
      problem(missing_seq, where + ": no integer seq= attribute in '" + s.attrs + "'");
      continue;
    }
    seqs[owner].push_back(*seq);
  }
  CHECK_MESSAGE(wrong_pid == 0, wrong_pid, " record(s) with the wrong pid; first:\n",
                first_problem);
  CHECK_MESSAGE(wrong_tid == 0, wrong_tid, " record(s) with the wrong tid; first:\n",
                first_problem);
  CHECK_MESSAGE(mixed_owner == 0, mixed_owner, " record(s) of two threads under one (pid, tid)",
                "; first:\n", first_problem);
  CHECK_MESSAGE(missing_seq == 0, missing_seq, " record(s) without seq; first:\n", first_problem);

  // Per producer, seq strictly increases: two writers in one ring, or a replayed or reordered
  // record, would break it.
  for (const auto& [owner, list] : seqs) {
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i] <= list[i - 1]) {
        FAIL_CHECK("pid ", owner.first, " tid ", owner.second, " (", name_of_owner[owner],
                   "): seq ", list[i], " after ", list[i - 1], " at its record ", i);
        break;
      }
    }
  }

  // Every child ran 3 emitting threads, one of them the forking thread, which in the child has
  // tid == pid (it is the child's first thread). Its records must carry that tid, not the
  // parent thread's.
  CHECK_MESSAGE(child_tids.size() == child_pids.size(), "fork.child records from ",
                child_tids.size(), " of ", child_pids.size(), " children");
  for (const auto& [pid, tids] : child_tids) {
    CHECK_MESSAGE(tids.size() == child_threads, "child ", pid, ": records from ", tids.size(),
                  " threads, it ran ", child_threads);
    CHECK_MESSAGE(tids.count(pid) == 1, "child ", pid,
                  ": no record from its forking thread (tid == pid)");
  }

  // Accounting. Drops are per (pid, tid) owner; no_ring drops (every ring taken) would have no
  // owner and cannot happen with 256 rings and 4 + 3 * children threads.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> dropped_by_owner;
  for (const DropsLine& d : trace.drops) dropped_by_owner[{d.pid, d.tid}] += d.dropped;
  uint64_t emitted_total = 0;
  for (const auto& [name, count] : emitted.at("counts").items()) {
    emitted_total += count.get<uint64_t>();
  }
  CHECK_MESSAGE(summary.written + summary.dropped == emitted_total, "written ", summary.written,
                " + dropped ", summary.dropped, " != emitted ", emitted_total);
  if (!stress()) {
    // Default sizes: no thread emits more than a ring holds, so nothing may be lost.
    CHECK_MESSAGE(summary.dropped == 0, "the drainer reported ", summary.dropped,
                  " dropped records, but no thread "
                  "of the emitter publishes more than 3000 of its ring's 65,536 slots: a drop "
                  "here is a spanring bug (see the [SPANRING_DROPS] lines in ",
                  out, ")");
    for (const auto& [name, count] : emitted.at("counts").items()) {
      const uint64_t got = trace.count(name);
      CHECK_MESSAGE(got == count.get<uint64_t>(), name, ": ", got, " records written, ",
                    count.get<uint64_t>(), " emitted");
    }
    for (const auto& [owner, list] : seqs) {
      if (name_of_owner[owner] != "fork.child") continue;
      CHECK_MESSAGE(list.size() == per_child_thread, "child pid ", owner.first, " tid ",
                    owner.second, ": ", list.size(), " records, emitted ", per_child_thread);
    }
  } else {
    // Per owner: written + dropped == emitted.
    for (const auto& [owner, list] : seqs) {
      const std::string& name = name_of_owner[owner];
      const uint64_t want =
          name == "fork.child" ? per_child_thread : emitted.at("counts").at(name).get<uint64_t>();
      CHECK_MESSAGE(list.size() + dropped_by_owner[owner] == want, "pid ", owner.first, " tid ",
                    owner.second, " (", name, "): written ", list.size(), " + dropped ",
                    dropped_by_owner[owner], " != emitted ", want);
    }
  }
}

TEST_CASE("a vfork child's spans before exec or _exit are dropped as reason=vfork, never in its "
          "parent's ring") {
  TempDir tmp;
  const EmitterRun e = run_emitter(tmp, "VFORK_EMITTER", {}, {"--child-spans", "7"}, 40);
  INFO("spanring run: ", e.run.describe());
  const Trace trace = load_trace(e.out);
  check_trace_invariants(trace, e.summary, e.run.err, e.out);
  REQUIRE(e.emitted.size() == 1);
  const nlohmann::json& emitted = e.emitted[0];
  const uint64_t parent_pid = emitted.at("parent_pid").get<uint64_t>();
  const uint64_t parent_tid = emitted.at("parent_tid").get<uint64_t>();
  CHECK(emitted.at("child_spans").get<uint64_t>() == 7);
  // The parent's spans around the vfork are its own, and nothing else is in the file.
  CHECK(trace.spans.size() == 2);
  CHECK(trace.count("vfork.child") == 0);
  for (const char* name : {"vfork.parent.before", "vfork.parent.after"}) {
    INFO(name);
    CHECK(trace.count(name) == 1);
  }
  for (const SpanLine& s : trace.spans) {
    CHECK(s.pid == parent_pid);
    CHECK(s.tid == parent_tid);
  }
  // The child's 7 spans: segment-wide drops with reason vfork, and nothing else dropped.
  uint64_t vfork_dropped = 0;
  for (const DropsLine& d : trace.drops) {
    CHECK(d.reason == "vfork");
    if (d.reason == "vfork") vfork_dropped += d.dropped;
  }
  CHECK(vfork_dropped == 7);
  CHECK(e.summary.dropped == 7);
}

}  // TEST_SUITE("mp")
