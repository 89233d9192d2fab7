// Spans emitted from signal handlers (signal_emitter.cpp): SIGPROF from setitimer(ITIMER_PROF)
// every 100 us and per-thread SIGPROF/SIGALRM timers every 100-170 us, whose handler emits a
// spanring::Span and a spanring_emit record, interrupting threads that are themselves inside
// spans and inside the producer (and one handler interrupting the other); and a thread whose
// very first record is emitted in a handler. The run ends (no deadlock), does not crash, and
// for every thread the records written plus the drops reported for it equal what it attempted,
// handler records included.
#include "fault_check.h"

#include <doctest/doctest.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>
#include <string>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

namespace {

// Per thread: written + dropped == attempted; no name written more often than attempted; with
// no drops, every name exact. `got`: tid -> name -> records written; `dropped`: tid -> drops.
std::vector<std::string> reconcile(const json& threads,
                                   const std::map<uint64_t, std::map<std::string, uint64_t>>& got,
                                   const std::map<uint64_t, uint64_t>& dropped) {
  std::vector<std::string> p;
  for (const json& t : threads) {
    const uint64_t tid = t.at("tid").get<uint64_t>();
    const std::string who = t.at("role").get<std::string>() + " (tid " + std::to_string(tid) + ")";
    const auto g = got.find(tid);
    const uint64_t drops = dropped.count(tid) != 0 ? dropped.at(tid) : 0;
    uint64_t attempted = 0;
    uint64_t written = 0;
    for (const auto& [name, n] : t.at("counts").items()) {
      const uint64_t want = n.get<uint64_t>();
      const uint64_t have =
          g == got.end() || g->second.count(name) == 0 ? 0 : g->second.at(name);
      attempted += want;
      written += have;
      if (have > want || (drops == 0 && have != want)) {
        p.push_back(who + " " + name + ": " + std::to_string(have) + " written, " +
                    std::to_string(want) + " attempted, " + std::to_string(drops) +
                    " dropped on the thread");
      }
    }
    if (g != got.end()) {
      for (const auto& [name, n] : g->second) {
        if (!t.at("counts").contains(name)) {
          p.push_back(who + ": " + std::to_string(n) + " record(s) " + name + " it never emitted");
        }
      }
    }
    if (written + drops != attempted) {
      p.push_back(who + ": written " + std::to_string(written) + " + dropped " +
                  std::to_string(drops) + " != attempted " + std::to_string(attempted));
    }
  }
  return p;
}

struct SignalRun : EmitterRun {
  TraceFacts facts;
};

// Runs the emitter under `spanring run <ring_opts>` and checks everything but drop reasons.
void run_and_reconcile(const std::vector<std::string>& ring_opts, const std::string& spans,
                       SignalRun& r) {
  TempDir tmp;
  // run_emitter REQUIREs that the run did not time out (a deadlock in a handler ends there) and
  // exited 0 (a crash does not: spanring run exits 128 + signal).
  static_cast<EmitterRun&>(r) = run_emitter(tmp, "FAULT_SIGNAL_EMITTER", ring_opts,
                                            {"--spans", spans}, 25);
  INFO("spanring run: ", r.run.describe());
  REQUIRE(r.emitted.size() == 1);
  const json& em = r.emitted[0];
  INFO("emitter: ", em.dump());
  const uint64_t pid = em.at("pid").get<uint64_t>();

  std::map<uint64_t, std::map<std::string, uint64_t>> got;
  uint64_t foreign = 0;
  r.facts = scan_trace(r.out, [&](const SpanLine& s, uint64_t) {
    if (s.pid != pid) ++foreign;
    ++got[s.tid][s.name];
  });
  const TraceFacts& facts = r.facts;
  const Summary& summary = r.summary;
  const std::vector<std::string> inv = invariant_problems(facts, summary, r.run.err, r.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));
  CHECK(foreign == 0);
  CHECK(summary.unfinished == 0);
  CHECK_MESSAGE(facts.dropped_with_reason("no_ring") == 0, "a thread found no ring");
  std::map<uint64_t, uint64_t> dropped;
  for (const auto& [owner, n] : facts.dropped_by_owner()) dropped[owner.second] += n;

  const json& threads = em.at("threads");
  const std::vector<std::string> rec = reconcile(threads, got, dropped);
  CHECK_MESSAGE(rec.empty(), describe(rec));

  uint64_t handler_records = 0;
  for (const json& t : threads) {
    const json& c = t.at("counts");
    const uint64_t in_handler = c.at("sig.prof.span").get<uint64_t>() +
                                c.at("sig.prof.c").get<uint64_t>() +
                                c.at("sig.alrm.span").get<uint64_t>() +
                                c.at("sig.alrm.c").get<uint64_t>();
    handler_records += in_handler;
    if (t.at("role") == "handler_only") {
      // Its records all come from the handler, and there are some: its ring was claimed there.
      CHECK(c.at("sig.main.span").get<uint64_t>() + c.at("sig.main.c").get<uint64_t>() == 0);
      CHECK_MESSAGE(t.at("handler_calls").get<uint64_t>() >= 50,
                    "the handler-only thread's timer did not fire 50 times");
      const uint64_t tid = t.at("tid").get<uint64_t>();
      uint64_t written = 0;
      for (const auto& [name, n] : got[tid]) written += n;
      CHECK_MESSAGE(written > 0, "nothing written by the thread whose first span was in a "
                    "handler (", in_handler, " attempted, ", dropped[tid], " dropped)");
    }
  }
  MESSAGE(em.at("handler_calls").get<uint64_t>(), " handler calls, ", handler_records,
          " handler records attempted; ", summary.written, " written, ", summary.dropped,
          " dropped (", facts.drops.size(), " drop lines)");
  uint64_t attempted = 0;
  for (const json& t : threads) {
    for (const auto& [name, n] : t.at("counts").items()) attempted += n.get<uint64_t>();
  }
  CHECK(summary.written + summary.dropped == attempted);

  // Negative controls: one handler record missing, or one more than attempted, is caught.
  for (const json& t : threads) {
    const uint64_t tid = t.at("tid").get<uint64_t>();
    auto fewer = got;
    if (fewer[tid]["sig.prof.span"] > 0) {
      --fewer[tid]["sig.prof.span"];
      CHECK_FALSE(reconcile(threads, fewer, dropped).empty());
    }
    auto more = got;
    ++more[tid]["sig.alrm.c"];
    CHECK_FALSE(reconcile(threads, more, dropped).empty());
  }
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("spans emitted from signal handlers at a high rate are written or counted, and a "
          "thread may emit its first span in a handler") {
  SignalRun r;
  run_and_reconcile({}, "200000", r);
}

TEST_CASE("a handler's record refused because its thread was inside the producer is not "
          "reported as ring_full") {
  // Rings of 2^18 slots: no thread of the emitter writes more than ~150,000 slots with 50,000
  // spans (checked below), so no ring can ever be full, and a drop must carry a reason that
  // says why it happened. 3 rings of 16 MiB: skipped where /dev/shm cannot hold them.
  constexpr uint64_t kSlots = 1u << 18;
  struct statvfs shm {};
  if (::statvfs("/dev/shm", &shm) != 0 ||
      uint64_t{shm.f_bavail} * shm.f_frsize < 2 * 3 * kSlots * 64) {
    MESSAGE("skipped: /dev/shm has no room for 3 rings of ", kSlots, " slots");
    std::exit(77);
  }
  SignalRun r;
  run_and_reconcile({"--rings", "3", "--ring-records", std::to_string(kSlots)}, "50000", r);
  INFO("spanring run: ", r.run.describe());
  uint64_t most_slots = 0;
  for (const json& t : r.emitted[0].at("threads")) {
    uint64_t n = 0;
    for (const auto& [name, c] : t.at("counts").items()) n += c.get<uint64_t>();
    most_slots = std::max<uint64_t>(most_slots, 2 * n);  // every record here takes 1 or 2 slots
  }
  REQUIRE_MESSAGE(most_slots < kSlots, "a thread wrote enough to fill its ring: ",
                  most_slots, " slots");
  CHECK_MESSAGE(r.facts.dropped_with_reason("ring_full") == 0,
                r.facts.dropped_with_reason("ring_full"), " record(s) reported as reason=ring_full "
                "on ", r.facts.drop_lines_with_reason("ring_full"), " line(s), although no ring "
                "could fill (at most ", most_slots, " of ", kSlots, " slots per thread): these are "
                "handler records refused while their thread was inside the producer");
}

}  // TEST_SUITE
