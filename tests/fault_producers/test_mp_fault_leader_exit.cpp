// A process whose main thread has exited (pthread_exit) but whose other threads go on tracing
// (leader_emitter.cpp) is alive: its threads keep their rings and every record is written;
// nothing is reported as unfinished, nothing is dropped. (The kernel shows such a process'
// thread-group leader as a zombie in /proc/<pid>/stat; a liveness check that reads only the
// leader's state takes the process for dead; it then frees the live threads' rings, reports
// their open spans as unfinished, and hands the rings to other threads while their owners
// still write into them.)
#include "fault_check.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

TEST_SUITE("fault") {

TEST_CASE("a process whose main thread called pthread_exit keeps its other threads' rings and "
          "records") {
  TempDir tmp;
  const EmitterRun e = run_emitter(tmp, "FAULT_LEADER_EMITTER", {}, {}, 20);
  INFO("spanring run: ", e.run.describe());
  REQUIRE(e.emitted.size() == 1);
  const json& em = e.emitted[0];
  INFO("emitter: ", em.dump());
  const uint64_t pid = em.at("pid").get<uint64_t>();

  std::map<std::string, std::map<uint64_t, uint64_t>> got;  // name -> tid -> records
  const TraceFacts facts = scan_trace(e.out, [&](const SpanLine& s, uint64_t) {
    CHECK(s.pid == pid);
    ++got[s.name][s.tid];
  });
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  CHECK_MESSAGE(em.at("ring_lost_while_alive").empty(),
                "a worker saw its ring freed or handed to another owner while it was alive "
                "and tracing: ", em.at("ring_lost_while_alive").dump());
  const uint64_t main_tid = em.at("tids").at("leader.main").get<uint64_t>();
  CHECK(got["leader.main"][main_tid] == em.at("counts").at("leader.main").get<uint64_t>());
  const int workers = static_cast<int>(em.at("counts").at("leader.worker.hold").get<uint64_t>());
  const uint64_t per_worker = em.at("counts").at("leader.worker").get<uint64_t>() / workers;
  for (int i = 0; i < workers; ++i) {
    const uint64_t tid = em.at("tids").at("worker" + std::to_string(i)).get<uint64_t>();
    CHECK_MESSAGE(got["leader.worker"][tid] == per_worker, "worker ", i, " (tid ", tid, "): ",
                  got["leader.worker"][tid], " of its ", per_worker, " records written");
    CHECK_MESSAGE(got["leader.worker.hold"][tid] == 1, "worker ", i, " (tid ", tid,
                  "): its held span, ended normally, is not in the trace");
  }
  CHECK_MESSAGE(facts.unfinished.empty(), facts.unfinished.size(), " [SPANRING_UNFINISHED] "
                "line(s), but no span was open when the process ended");
  CHECK(e.summary.unfinished == 0);
  CHECK(e.summary.dropped == 0);
  uint64_t emitted = 0;
  for (const auto& [name, n] : em.at("counts").items()) emitted += n.get<uint64_t>();
  CHECK_MESSAGE(e.summary.written + e.summary.dropped == emitted, "written ", e.summary.written,
                " + dropped ", e.summary.dropped, " != emitted ", emitted,
                ": records lost without being counted");
  CHECK(e.run.err.find("quarantined") == std::string::npos);
}

}  // TEST_SUITE

TEST_SUITE("fault") {

TEST_CASE("a ring held by a thread of a process whose main thread exited is not given to "
          "another thread") {
  TempDir tmp;
  // One ring: the worker holds it for its whole life (with a span open in it); the thread it
  // starts half-way must find no ring and lose its 50 records as no_ring drops.
  const EmitterRun e =
      run_emitter(tmp, "FAULT_LEADER_EMITTER", {"--rings", "1"}, {"--intruder", "1"}, 20);
  INFO("spanring run: ", e.run.describe());
  REQUIRE(e.emitted.size() == 1);
  const json& em = e.emitted[0];
  INFO("emitter: ", em.dump());
  const uint64_t worker_tid = em.at("tids").at("worker0").get<uint64_t>();
  const uint64_t intruder_tid = em.at("tids").at("leader.intruder").get<uint64_t>();
  const uint64_t intruder_spans = em.at("counts").at("leader.intruder").get<uint64_t>();
  const uint64_t worker_records = em.at("counts").at("leader.worker").get<uint64_t>() + 1;

  std::map<uint64_t, uint64_t> written_by_tid;
  const TraceFacts facts = scan_trace(e.out, [&](const SpanLine& s, uint64_t) {
    ++written_by_tid[s.tid];
  });
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  CHECK_MESSAGE(em.at("intruder_stored").get<uint64_t>() == 0,
                "spanring::emit stored ", em.at("intruder_stored").get<uint64_t>(),
                " intruder records although the only ring was held by a live thread");
  CHECK_MESSAGE(written_by_tid[worker_tid] == worker_records, "the worker (tid ", worker_tid,
                "): ", written_by_tid[worker_tid], " of its ", worker_records,
                " records written");
  CHECK(written_by_tid[intruder_tid] == 0);
  CHECK_MESSAGE(facts.dropped_with_reason("no_ring") == intruder_spans,
                "no_ring drops: ", facts.dropped_with_reason("no_ring"), ", the intruder emitted ",
                intruder_spans, " with no ring free");
  CHECK(e.summary.dropped == intruder_spans);
  CHECK(e.summary.written == worker_records);
  CHECK(e.summary.unfinished == 0);
  CHECK_MESSAGE(e.run.err.find("quarantined") == std::string::npos,
                "a ring was quarantined (two producers wrote into it)");
}

}  // TEST_SUITE
