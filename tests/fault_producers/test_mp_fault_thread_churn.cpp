// Thread churn (churn_emitter.cpp): threads that live for a few records each claim a ring,
// release it at exit, and the drainer frees it for the next; and threads that find every ring
// taken lose their records with reason no_ring, counted exactly, with no crash.
//
// Each record names its thread (`t=<i>`), so the trace is reconciled thread by thread: a thread
// emits at most 100 records of 2 slots into a ring of 4096 slots, so it either had a ring and
// every record is written, or it had none and every record is a no_ring drop. No other outcome
// is correct, and the no_ring drops must add up to exactly the records of the ringless threads.
#include "fault_check.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

namespace {

struct ThreadCounts {
  std::vector<uint64_t> written;          // records written, per thread index
  std::vector<uint64_t> written_emits;    // of them, spanring::emit records (a=e)
  uint64_t foreign = 0;                   // records that name no thread of the emitter
  std::string first_foreign;
};

// The verdict on per-thread counts: all-or-nothing per thread, stored emits as the emitter saw
// them, per-name totals, and the no_ring total. Returns problems; `ringless` gets the records of
// threads that had no ring.
std::vector<std::string> reconcile_threads(const std::vector<uint64_t>& emitted,
                                           const std::vector<uint64_t>& stored_emits,
                                           const ThreadCounts& got, uint64_t no_ring_dropped,
                                           uint64_t* ringless_threads) {
  std::vector<std::string> p;
  uint64_t ringless_records = 0;
  *ringless_threads = 0;
  for (size_t i = 0; i < emitted.size(); ++i) {
    if (got.written[i] == 0) {
      ++*ringless_threads;
      ringless_records += emitted[i];
      if (stored_emits[i] != 0) {
        p.push_back("thread " + std::to_string(i) + ": emit() returned true " +
                    std::to_string(stored_emits[i]) + " times but none of its records is written");
      }
    } else if (got.written[i] != emitted[i]) {
      p.push_back("thread " + std::to_string(i) + ": " + std::to_string(got.written[i]) +
                  " of its " + std::to_string(emitted[i]) + " records written (all or none)");
    } else if (got.written_emits[i] != stored_emits[i]) {
      p.push_back("thread " + std::to_string(i) + ": " + std::to_string(got.written_emits[i]) +
                  " emit() records written, emit() returned true " +
                  std::to_string(stored_emits[i]) + " times");
    }
  }
  if (ringless_records != no_ring_dropped) {
    p.push_back("no_ring drops reported: " + std::to_string(no_ring_dropped) +
                ", but the threads with no record written emitted " +
                std::to_string(ringless_records));
  }
  if (got.foreign != 0) {
    p.push_back(std::to_string(got.foreign) + " record(s) that belong to no thread, first: " +
                got.first_foreign);
  }
  return p;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("short-lived threads reuse released rings and every record is written or counted") {
  TempDir tmp;
  const std::string threads = stress() ? "100000" : "20000";

  const EmitterRun e = run_emitter(tmp, "FAULT_CHURN_EMITTER", {"--rings", "256"},
                                   {"--mode", "churn", "--threads", threads, "--alive", "64"},
                                   stress() ? 280 : 40);
  INFO("spanring run: ", e.run.describe());
  REQUIRE(e.emitted.size() == 1);
  const json& em = e.emitted[0];
  const uint64_t pid = em.at("pid").get<uint64_t>();
  const auto emitted = em.at("per_thread").get<std::vector<uint64_t>>();
  const auto stored = em.at("stored_emits").get<std::vector<uint64_t>>();
  const auto tids = em.at("tids").get<std::vector<uint64_t>>();
  REQUIRE(emitted.size() == std::stoull(threads));

  ThreadCounts got;
  got.written.assign(emitted.size(), 0);
  got.written_emits.assign(emitted.size(), 0);
  std::map<std::string, uint64_t> written_by_name;
  const TraceFacts facts = scan_trace(e.out, [&](const SpanLine& s, uint64_t line_no) {
    const auto t = attr_u64(s, "t");
    const auto a = attr_value(s.attrs, "a");
    const bool ok = t && *t < emitted.size() && s.pid == pid && s.tid == tids[*t] &&
                    s.name == "churn.n" + std::to_string(*t % 8) && a && (*a == "s" || *a == "e");
    if (!ok) {
      if (got.foreign++ == 0) {
        got.first_foreign = "line " + std::to_string(line_no) + ": " + s.name + " pid " +
                            std::to_string(s.pid) + " tid " + std::to_string(s.tid) + " attrs '" +
                            s.attrs + "'";
      }
      return;
    }
    ++got.written[*t];
    got.written_emits[*t] += *a == "e" ? 1 : 0;
    ++written_by_name[s.name];
  });
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  const uint64_t no_ring = facts.dropped_with_reason("no_ring");
  uint64_t ringless = 0;
  const std::vector<std::string> rec = reconcile_threads(emitted, stored, got, no_ring, &ringless);
  CHECK_MESSAGE(rec.empty(), describe(rec));
  MESSAGE(threads, " threads, 64 alive at most, 256 rings: ", e.summary.written, " written, ",
          no_ring, " no_ring drops (", ringless, " thread(s) found no free ring), ",
          facts.drop_lines_with_reason("no_ring"), " no_ring line(s)");
  // The only loss possible here is no_ring: no thread fills its ring.
  CHECK_MESSAGE(facts.dropped_by_owner().empty(), "drops attributed to a thread's ring: a "
                "thread's 200 slots cannot fill a 4096-slot ring");
  CHECK(e.summary.dropped == no_ring);
  CHECK(e.summary.unfinished == 0);

  // Per name: written + dropped == emitted, the dropped ones being the ringless threads'.
  uint64_t emitted_total = 0;
  for (const auto& [name, n] : em.at("counts").items()) {
    uint64_t lost = 0;
    for (size_t i = 0; i < emitted.size(); ++i) {
      if ("churn.n" + std::to_string(i % 8) == name && got.written[i] == 0) lost += emitted[i];
    }
    CHECK_MESSAGE(written_by_name[name] + lost == n.get<uint64_t>(), name, ": written ",
                  written_by_name[name], " + dropped ", lost, " != emitted ", n.get<uint64_t>());
    emitted_total += n.get<uint64_t>();
  }
  CHECK(e.summary.written + e.summary.dropped == emitted_total);

  // Negative controls: a thread missing one record, a lost thread not counted as no_ring, and
  // a written record emit() said it dropped are each caught.
  {
    ThreadCounts bad = got;
    for (size_t i = 0; i < bad.written.size(); ++i) {
      if (bad.written[i] > 1) {
        --bad.written[i];
        break;
      }
    }
    uint64_t r = 0;
    CHECK_FALSE(reconcile_threads(emitted, stored, bad, no_ring, &r).empty());
    CHECK_FALSE(reconcile_threads(emitted, stored, got, no_ring + 1, &r).empty());
    std::vector<uint64_t> bad_stored = stored;
    for (size_t i = 0; i < bad_stored.size(); ++i) {
      if (got.written[i] != 0) {
        ++bad_stored[i];
        break;
      }
    }
    CHECK_FALSE(reconcile_threads(emitted, bad_stored, got, no_ring, &r).empty());
  }
}

TEST_CASE("threads beyond the ring count lose their records as no_ring drops without a crash") {
  TempDir tmp;
  constexpr uint64_t kRings = 8;
  constexpr uint64_t kThreads = 32;
  constexpr uint64_t kSpans = 100;  // emits per thread, plus its held span

  const EmitterRun e = run_emitter(
      tmp, "FAULT_CHURN_EMITTER", {"--rings", std::to_string(kRings)},
      {"--mode", "noring", "--threads", std::to_string(kThreads), "--spans",
       std::to_string(kSpans)},
      20);
  INFO("spanring run: ", e.run.describe());
  REQUIRE(e.emitted.size() == 1);
  const json& em = e.emitted[0];
  const uint64_t pid = em.at("pid").get<uint64_t>();
  const auto emitted = em.at("per_thread").get<std::vector<uint64_t>>();
  const auto stored = em.at("stored_emits").get<std::vector<uint64_t>>();
  const auto tids = em.at("tids").get<std::vector<uint64_t>>();
  REQUIRE(emitted.size() == kThreads);

  ThreadCounts got;
  got.written.assign(kThreads, 0);
  got.written_emits.assign(kThreads, 0);
  const TraceFacts facts = scan_trace(e.out, [&](const SpanLine& s, uint64_t line_no) {
    const auto t = attr_u64(s, "t");
    const bool ok = t && *t < kThreads && s.pid == pid && s.tid == tids[*t] &&
                    (s.name == "noring.hold" || s.name == "noring.emit");
    if (!ok) {
      if (got.foreign++ == 0) got.first_foreign = "line " + std::to_string(line_no);
      return;
    }
    ++got.written[*t];
    got.written_emits[*t] += s.name == "noring.emit" ? 1 : 0;
  });
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  const uint64_t no_ring = facts.dropped_with_reason("no_ring");
  uint64_t ringless = 0;
  const std::vector<std::string> rec = reconcile_threads(emitted, stored, got, no_ring, &ringless);
  CHECK_MESSAGE(rec.empty(), describe(rec));
  // Every ring is free when the threads start and none is released before all hold a span, so
  // exactly kRings threads have one.
  CHECK(ringless == kThreads - kRings);
  CHECK(no_ring == (kThreads - kRings) * (kSpans + 1));
  CHECK_MESSAGE(facts.drop_lines_with_reason("no_ring") >= 1, "no reason=no_ring line");
  MESSAGE("no_ring drops reported on ", facts.drop_lines_with_reason("no_ring"),
          " line(s) (one per owner check that saw new ones)");
  for (const DropsLine& d : facts.drops) {
    CHECK_MESSAGE(d.reason == "no_ring", "unexpected drop line, reason=", d.reason);
    CHECK(d.pid == 0);
    CHECK(d.tid == 0);
  }
  CHECK(e.summary.written == kRings * (kSpans + 1));
  CHECK(e.summary.dropped == (kThreads - kRings) * (kSpans + 1));
  CHECK(e.summary.threads == kRings);
  CHECK(e.summary.processes == 1);
  CHECK(e.summary.unfinished == 0);
}

}  // TEST_SUITE
