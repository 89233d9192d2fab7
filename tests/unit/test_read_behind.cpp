// Reading behind the producer: while a ring's head moves between polls, Drainer::poll() leaves
// the last Drainer::kHeadMarginSlots slots before the 128-byte pair that holds the head unread
// (the producer's next lines stay its own), reads them once the head stops moving, and
// poll_all() reads to the head. Real producer library and real Drainer in one process, the
// records written by this thread (its ring stays active: a thread that exits releases its
// ring, which the drainer reads to the head); a flight recorder for the destination.
#include "in_process_drainer.h"

#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>

#include <unistd.h>

#include <cstdint>
#include <string>

using namespace spanring;

namespace {

struct Setup : test::InProcessDrainer {
  Setup() : InProcessDrainer("spanring-test-read-behind-" + std::to_string(::getpid())) {}
};

// `n` one-slot records (a literal name, literal attribute text, caller-supplied times).
void write_records(int n) {
  for (int i = 0; i < n; ++i) emit("read.behind", 1'000'000'000 + i, 10, "k=1");
}

}  // namespace

TEST_CASE("a poll stops kHeadMarginSlots before a moving head and reads the rest once it stops") {
  static_assert(Drainer::kHeadMarginSlots >= 16);  // past the producer's prefetch distance
  Setup s;
  write_records(1);        // claims this thread's ring
  CHECK(s.drainer.poll() == 0);  // the head moved from 0: one slot is within the margin
  CHECK(s.drainer.poll() == 1);  // the head did not move since: read to it
  CHECK(s.drainer.poll() == 0);

  constexpr int kBurst = 200;
  write_records(kBurst);
  // The slots from the previous head on are kBurst one-slot records; the stop is the start of
  // the pair that holds the head (the head itself or one before), less the margin.
  const uint64_t first = s.drainer.poll();
  CHECK(first <= kBurst - Drainer::kHeadMarginSlots);
  CHECK(first >= kBurst - Drainer::kHeadMarginSlots - 1);
  CHECK(s.drainer.poll() == kBurst - first);  // unmoved since: the rest
  CHECK(s.drainer.poll() == 0);

  // A head that keeps moving: each poll reads what is behind the margin, nothing in it.
  uint64_t read = 0;
  for (int round = 0; round < 10; ++round) {
    write_records(50);
    read += s.drainer.poll();
    CHECK(read <= uint64_t{50} * (round + 1) - Drainer::kHeadMarginSlots);
  }
  // poll_all(), as a final drain or a flight-recorder snapshot: to the head, moving or not.
  write_records(10);
  read += s.drainer.poll_all();
  CHECK(read == 500 + 10);
}
