// PollPacer (drain/poll_pacer.h): when the drain loop polls next, from what it found.
#include "drain/poll_pacer.h"

#include <doctest/doctest.h>

#include <chrono>

using spanring::PollPacer;
using namespace std::chrono_literals;

TEST_CASE("a poll that found nothing waits doubling from 50 us, up to 1 ms while warm") {
  const auto t0 = PollPacer::Clock::time_point{} + 1h;
  PollPacer p(32768, t0);
  auto t = t0;
  CHECK(p.after_poll(t += 1us, 0, 0) == 50);
  CHECK(p.after_poll(t += 50us, 0, 0) == 100);
  CHECK(p.after_poll(t += 100us, 0, 0) == 200);
  for (int i = 0; i < 10; ++i) p.after_poll(t += 1ms, 0, 0);
  CHECK(p.after_poll(t += 1ms, 0, 0) == PollPacer::kWarmMaxUs);
}

TEST_CASE("a second after the last record the idle wait grows to 20 ms") {
  const auto t0 = PollPacer::Clock::time_point{} + 1h;
  PollPacer p(32768, t0);
  auto t = t0 + 2s;  // the start is more than a second ago
  int64_t w = 0;
  for (int i = 0; i < 20; ++i) w = p.after_poll(t += 1ms, 0, 0);
  CHECK(w == PollPacer::kIdleMaxUs);
  // A record makes it warm again: the next idle waits start over, capped at 1 ms.
  CHECK(p.after_poll(t += 20ms, 1, 1) > 0);
  for (int i = 0; i < 20; ++i) w = p.after_poll(t += 1ms, 0, 0);
  CHECK(w == PollPacer::kWarmMaxUs);
}

TEST_CASE("a poll that found records waits for an eighth of the busiest ring at its rate") {
  const auto t0 = PollPacer::Clock::time_point{} + 1h;
  PollPacer p(32768, t0);
  auto t = t0;
  p.after_poll(t += 100us, 0, 0);
  // 512 slots in 100 us: 4,096 (an eighth) take 800 us.
  CHECK(p.after_poll(t += 100us, 512, 512) == 800);
  // Slower than an eighth in kActiveMaxUs: at most kActiveMaxUs (2 ms).
  CHECK(p.after_poll(t += 800us, 10, 10) == PollPacer::kActiveMaxUs);
  // An eighth or more already: poll again at once.
  CHECK(p.after_poll(t += 1ms, 4096, 4096) == 0);
  // Slots left unread behind the head count as found (records 0): read at the next poll.
  CHECK(p.after_poll(t += 1ms, 0, 1) == PollPacer::kActiveMaxUs);
}

TEST_CASE("a poll that saw a ring claimed restarts the waits at 50 us, warm (up to 1 ms)") {
  const auto t0 = PollPacer::Clock::time_point{} + 1h;
  PollPacer p(32768, t0);
  auto t = t0 + 2s;
  int64_t w = 0;
  for (int i = 0; i < 20; ++i) w = p.after_poll(t += 20ms, 0, 0);
  CHECK(w == PollPacer::kIdleMaxUs);
  // The wait ended early by the claim: no record yet, but the thread's first ones follow.
  CHECK(p.after_poll(t += 3ms, 0, 0, true) == PollPacer::kFirstWaitUs);
  for (int i = 0; i < 20; ++i) w = p.after_poll(t += 1ms, 0, 0);
  CHECK(w == PollPacer::kWarmMaxUs);
  // A second later with nothing: idle again.
  for (int i = 0; i < 20; ++i) w = p.after_poll(t += 100ms, 0, 0);
  CHECK(w == PollPacer::kIdleMaxUs);
}
