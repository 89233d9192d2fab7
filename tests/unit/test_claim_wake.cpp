// Wake on claim: a producer's ring claim (its thread's first record) ends the drainer's idle
// wait (Drainer::wait_for_claim, a FUTEX_WAIT on the segment's ring_claims; claim_ring in
// src/attach.cpp adds to the word and wakes it), and the poll after it looks at every ring and
// finds the new one. Real producer library and real Drainer, in one process (a flight
// recorder for the destination: nothing is written to disk).
#include "in_process_drainer.h"

#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

using namespace spanring;
using namespace std::chrono_literals;

namespace {

std::string unique_name(const char* what) {
  static int n = 0;
  return "spanring-test-claim-wake-" + std::to_string(::getpid()) + "-" + what + "-" +
         std::to_string(n++);
}

struct Setup : test::InProcessDrainer {
  Setup() : InProcessDrainer(unique_name("seg")) {}
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("a claim ends the drainer's idle wait, and the next poll finds the new ring") {
  Setup s;
  CHECK(s.drainer.poll() == 0);
  CHECK(s.seg.header().ring_claims.load(std::memory_order_relaxed) == 0);
  std::atomic<bool> emitted{false};
  // The claim comes 100 ms into a wait of 10 s: a wait that ends within 5 s was woken by it
  // (a machine too busy to run this thread for 5 s would fail it, not a missing wake-up).
  std::thread producer([&] {
    std::this_thread::sleep_for(100ms);
    emit("claim.wake", 1, 1, "");
    emitted.store(true, std::memory_order_release);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const bool early = s.drainer.wait_for_claim(10'000'000);
  const double waited = seconds_since(t0);
  producer.join();
  CHECK(early);
  CHECK(waited < 5.0);
  CHECK(waited >= 0.09);
  CHECK(s.seg.header().ring_claims.load(std::memory_order_relaxed) == 1);
  // The record may or may not be in the ring yet when the wait ended; once it is, the poll
  // that follows a claim looks at every ring (not only those owned at the last full scan).
  REQUIRE(emitted.load(std::memory_order_acquire));
  CHECK(s.drainer.poll() == 1);
  CHECK(s.drainer.last_poll_saw_claim());
  CHECK(s.drainer.poll() == 0);
  CHECK_FALSE(s.drainer.last_poll_saw_claim());
}

TEST_CASE("a claim between a poll and the wait is not missed: the wait returns at once") {
  Setup s;
  CHECK(s.drainer.poll() == 0);
  std::thread([] { emit("claim.wake", 1, 1, ""); }).join();
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(s.drainer.wait_for_claim(10'000'000));
  CHECK(seconds_since(t0) < 5.0);
  CHECK(s.drainer.poll() == 1);
  CHECK(s.drainer.last_poll_saw_claim());
}

TEST_CASE("with no claim the wait lasts its timeout") {
  Setup s;
  CHECK(s.drainer.poll() == 0);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(s.drainer.wait_for_claim(30'000));
  CHECK(seconds_since(t0) >= 0.029);
}

TEST_CASE("a thread's later records do not touch ring_claims (one wake-up per claim)") {
  Setup s;
  std::thread([] {
    for (int i = 0; i < 100; ++i) emit("claim.wake", i, 1, "");
  }).join();
  CHECK(s.seg.header().ring_claims.load(std::memory_order_relaxed) == 1);
}
