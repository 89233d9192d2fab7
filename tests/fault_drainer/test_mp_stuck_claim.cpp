// A ring claim cut short: a producer killed after it won a ring (the CAS to kRingClaiming) and
// before it wrote itself in as the owner leaves the ring mid-claim, its owner fields still
// those of the previous owner. The drainer frees such a ring after its stuck-claim delay (~5 s,
// kClaimStuckChecks owner checks), also when that previous owner is alive: here the previous
// owner is this test process, which stays alive throughout. With one ring in the segment,
// another producer traces again only once the ring is freed.
// Needs test points (SPANRING_TEST_POINT=producer_claim_started); skipped (77) without them.
#include "fault_util.h"

#include <spanring/segment.h>
#include <spanring/span.h>

#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using namespace fault_test;

namespace {

constexpr double kWaitS = 20;

uint32_t ring0_state(const std::string& name) {
  ShmView v;
  REQUIRE(v.open(name, false));
  return v.ring(0).state.load(std::memory_order_acquire);
}

// `stored=N` from fault_emitter's stdout line.
uint64_t stored(const std::string& out) {
  const size_t at = out.find("stored=");
  REQUIRE_MESSAGE(at != std::string::npos, "no stored= in: ", out);
  return std::strtoull(out.c_str() + at + 7, nullptr, 10);
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a claim whose claimer was killed before it wrote its owner fields is freed after the stuck-claim delay, although the ring's previous owner is alive") {
  spanring_test::skip_without_test_points();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string name = "spanring-faulttest-" + std::to_string(::getpid()) + "-stuck";
  SegmentGuard guard(name);
  spanring::Segment::create(name, spanring::SegmentOptions{1, 64});  // one ring
  const pid_t drainer = spawn({{spanring, "drain", "--segment", name, "-o", tmp.file("out.strace")},
                               {}, "", tmp.file("drain.err")});
  ChildGuard drainer_guard(drainer);
  INFO("spanring drain stderr:\n", slurp(tmp.file("drain.err")));

  // The ring's previous owner: a thread of this (live) process emits one record and exits; the
  // drainer writes it and frees the ring, whose owner fields keep naming this process.
  REQUIRE(spanring::attach(name.c_str()));
  std::thread([] { CHECK(spanring::emit("stuck.previous_owner", 1000, 1)); }).join();
  REQUIRE_MESSAGE(wait_until([&] { return ring0_state(name) == spanring::kRingFree; }, kWaitS),
                  "the drainer never freed the released ring");

  // The claimer: killed right after its CAS won the ring.
  const Exit killed = wait_exit(
      spawn({{emitter, "--threads", "1", "--count", "1"},
             {{"SPANRING_SEGMENT", name}, {"SPANRING_TEST_POINT", "producer_claim_started"}},
             "", tmp.file("claimer.err")}),
      kWaitS);
  REQUIRE_MESSAGE(killed.sig == SIGKILL, "the claimer should die at its test point: ",
                  killed.describe());
  {
    ShmView v;
    REQUIRE(v.open(name, false));
    REQUIRE(v.ring(0).state.load() == spanring::kRingClaiming);
    CHECK(v.ring(0).owner_pid == static_cast<uint32_t>(::getpid()));  // still the previous owner
  }

  // A producer that needs the ring: it drops (no_ring) until the stuck claim is freed, then
  // claims it and stores. The delay is ~5 s; it emits for 12 s.
  const std::string out = tmp.file("next.out");
  const pid_t next = spawn({{emitter, "--threads", "1", "--seconds", "12", "--pace-us", "200"},
                            {{"SPANRING_SEGMENT", name}}, out, tmp.file("next.err")});
  ChildGuard next_guard(next);
  const auto t0 = std::chrono::steady_clock::now();
  const bool freed =
      wait_until([&] { return ring0_state(name) != spanring::kRingClaiming; }, kWaitS);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_MESSAGE(freed, "the stuck claim was never freed");
  MESSAGE("the stuck claim was freed after ", waited, " s");
  const Exit e = wait_exit(next, kWaitS + 12);
  next_guard.release();
  REQUIRE_MESSAGE(e.exited_ok(), "the next producer: ", e.describe());
  CHECK_MESSAGE(stored(slurp(out)) > 0, "the next producer never got the ring: ", slurp(out));

  REQUIRE(wait_until([&] { return catches_signal(drainer, SIGTERM); }, kWaitS));
  ::kill(drainer, SIGTERM);
  const Exit d = wait_exit(drainer, kWaitS);
  drainer_guard.release();
  CHECK_MESSAGE(d.exited_ok(), "spanring drain: ", d.describe());
  // The next producer's records while the claim was stuck are in the trace, counted as no_ring.
  CHECK_MESSAGE(slurp(tmp.file("out.strace")).find(" reason=no_ring") != std::string::npos,
                "no no_ring drop line in the trace");
}

}  // TEST_SUITE
