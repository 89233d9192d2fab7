// PollPacer: when the drain loop polls the rings next, from what its last polls found.
//
// Each poll costs the drainer a pass over the rings and costs the producers a cache line each:
// reading a ring's head takes the line the producer stores head into away from its core, and
// the producer's next store has to take it back (~100 ns here). So the drainer polls as seldom
// as the rings allow, and reads what accumulated in one batch:
//
//   - a poll that found records waits until the busiest ring is expected to hold an eighth of
//     its capacity again, at the rate it filled since the previous poll (slots / time), and at
//     most kActiveMaxUs; a ring that already held an eighth is polled again at once (a rate
//     8x the last one still finds room);
//   - a poll that found nothing waits doubling from kFirstWaitUs, up to kWarmMaxUs while
//     records came, or a ring was claimed, in the last kWarmNs (or the loop started that
//     recently: a program's first records come right after it starts), else up to kIdleMaxUs.
//
// The idle wait ends early when a producer claims a ring (Drainer::wait_for_claim: the claim,
// a thread's first record and already the producer's slow path, wakes the drainer through a
// futex on the segment's ring_claims). So a thread that starts writing while the drainer
// sleeps is read from ~its claim on, warm, instead of after the rest of a 20 ms sleep.
//
// What that buys, with the default ring (65,536 slots, segment.h): an idle drainer wakes 50
// times a second; a new thread's ring is polled within kFirstWaitUs of its claim and then at
// most every kWarmMaxUs, so a thread that starts at 4 M one-slot records/s (16 ms of ring)
// is not outrun; a ring claimed long ago that starts a burst while the drainer sleeps holds
// 65,536 slots, which one thread flat out (~60 ns a one-slot span here) fills in ~4 ms, so a
// burst of 20,000 one-slot spans is whole whenever it comes, and a longer one is read while it
// goes on (the warm wait is 1 ms, the wait after a poll that found records at most 2 ms). A
// steady producer is read in batches of ~4,096 slots, once per batch.
//
// Rejected: polling at a fixed short interval (a poll of 256 silent rings every 1 ms is ~1% of
// a core); a producer that wakes the drainer at any record but its first (a futex or eventfd
// write is a system call on the hot path); polling only the rings that had records (a thread
// that was silent for a minute may burst at any time).
//
// Drain thread only; pure arithmetic, no clock of its own (the caller passes `now`).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace spanring {

class PollPacer {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr int64_t kFirstWaitUs = 50;   // the first wait after a poll found nothing
  static constexpr int64_t kWarmMaxUs = 1000;   // longest wait while records are recent
  // Longest wait: ~50 wake-ups a second. Each costs a sleep and a wake-up (a VM exit or two
  // here) and a look at every owned ring; with 256 silent owners, 10 ms was ~0.5% of a core.
  // A ring of the default size still holds 20 ms of a thread writing 1.6 M slots/s.
  static constexpr int64_t kIdleMaxUs = 20000;
  // Longest wait after a poll that found records. Each poll reads every owned ring's head
  // line, and the producer's next store to it must take the line back: in bench_interference
  // (20-record batches, 200 us pauses, so the rate rule alone says ~90 ms) the drainer
  // added 1.5-2.6 ns per emit record at 16 threads with 1 ms, 0.3-1.6 with 2 ms and 0-0.8 with
  // 4 ms (p50 live - stopped by place in the page, docs/performance.md "The producer with the
  // faster drainer running / stopped"). 2 ms, not more: a ring that a producer takes from a
  // trickle to flat out right after a poll must hold what comes until the next one, and 65,536
  // slots are ~4 ms of one thread writing ~60 ns spans.
  static constexpr int64_t kActiveMaxUs = 2000;
  static constexpr int64_t kWarmNs = 1'000'000'000;  // records this recent keep the loop warm
  // The fill a poll aims to find in the busiest ring: an eighth of a ring, so that a rate
  // eight times the one measured still finds room.
  static constexpr uint64_t kTargetDivisor = 8;

  // `ring_capacity`: slots per ring; `start`: when the loop starts (warm from there).
  PollPacer(uint64_t ring_capacity, Clock::time_point start) noexcept
      : target_slots_(std::max<uint64_t>(ring_capacity / kTargetDivisor, 1)),
        last_poll_(start), last_records_(start) {}

  // After a poll at `now` that read `records` records, of which the busiest ring gave
  // `peak_slots` slots, and that saw a ring claimed since the poll before it (`claimed`, the
  // drainer's last_poll_saw_claim): how long to wait before the next poll, in microseconds
  // (0: poll again at once). A claim counts as records just seen: a thread's first records
  // follow its claim, so the waits restart at kFirstWaitUs and stay warm (<= kWarmMaxUs).
  int64_t after_poll(Clock::time_point now, uint64_t records, uint64_t peak_slots,
                     bool claimed = false) noexcept {
    const int64_t since_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_poll_).count();
    last_poll_ = now;
    if (claimed) {
      last_records_ = now;
      idle_wait_us_ = 0;
    }
    if (records != 0 || peak_slots != 0) {
      last_records_ = now;
      idle_wait_us_ = 0;
      if (peak_slots >= target_slots_ || since_ns <= 0) return 0;
      // The time the busiest ring takes to fill target_slots_ at the rate it just had.
      const double us = static_cast<double>(since_ns) / 1000.0 *
                        static_cast<double>(target_slots_) / static_cast<double>(peak_slots);
      return static_cast<int64_t>(std::min<double>(us, kActiveMaxUs));
    }
    const bool warm = now - last_records_ < std::chrono::nanoseconds(kWarmNs);
    const int64_t max_us = warm ? kWarmMaxUs : kIdleMaxUs;
    idle_wait_us_ = idle_wait_us_ == 0 ? kFirstWaitUs : std::min(idle_wait_us_ * 2, max_us);
    idle_wait_us_ = std::min(idle_wait_us_, max_us);
    return idle_wait_us_;
  }

 private:
  uint64_t target_slots_;
  Clock::time_point last_poll_;
  Clock::time_point last_records_;
  int64_t idle_wait_us_ = 0;
};

}  // namespace spanring
