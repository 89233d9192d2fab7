// TscClock: converts TSC ticks, as kRecordTsc records and open spans carry them
// (include/spanring/segment_layout.h), to CLOCK_MONOTONIC ns. Drainer side only.
//
// The TSC is one counter for the whole machine on a CPU with an invariant TSC (constant rate,
// not stopped in idle states; Linux's clocksource "tsc" derives CLOCK_MONOTONIC from it). The
// drainer samples (TSC, CLOCK_MONOTONIC) pairs, at most every kSampleTicks of TSC (~10 ms) while
// it runs; each traced process contributes its own pair, taken when it attached (RingHeader::
// anchor_tsc / anchor_mono_ns). A tick count t is converted by linear interpolation between the
// nearest pairs below and above t, or, past the last pair, by extrapolation at the rate measured
// over the longest span of samples. Interpolation follows NTP's slewing of CLOCK_MONOTONIC
// between samples; a conversion is within the pairs' read error (tens of ns) of what
// clock_gettime would have returned at that tick, plus, when extrapolated, the slew since the
// last sample (at most 500 ppm by the kernel's limit, so < 5 us after 10 ms). See docs/design.md.
//
// Memory: at most kMaxSamples pairs; when full, every other sample is dropped (the window keeps
// its whole span at half the resolution). Not thread-safe: the drainer thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spanring {

class TscClock {
 public:
  struct Pair {
    uint64_t tsc;
    uint64_t ns;  // CLOCK_MONOTONIC
  };

  static constexpr size_t kMaxSamples = 4096;

  // Takes two samples ~2 ms apart, so that a rate exists before the first conversion.
  TscClock();
  // For tests: starts from the given pairs (sorted by tsc, at least two, distinct tsc).
  explicit TscClock(std::vector<Pair> samples);

  // Takes a sample if the last one is older than kSampleTicks (one rdtsc otherwise).
  void maybe_sample();
  // Adds a sample (tests; maybe_sample uses it). Ignored unless its tsc and ns are after the
  // last sample's.
  void add(Pair p);

  // CLOCK_MONOTONIC ns at tick t of a process whose attach pair is `anchor` (anchor.tsc == 0:
  // none). Never below anchor.ns when t >= anchor.tsc. Saturates at 0 and 2^64 - 1.
  uint64_t to_ns(uint64_t t, Pair anchor) const;
  // A span [t, t + dur) in ticks, in ns: both ends converted, so that consecutive spans stay
  // ordered; a duration that would be negative is 0.
  struct Interval {
    uint64_t start_ns;
    uint64_t dur_ns;
  };
  Interval span_ns(uint64_t t, uint64_t dur, Pair anchor) const;

  // ns per tick of the extrapolation rate, as 32.32 fixed point; for diagnostics.
  uint64_t rate_fixed() const { return rate_; }
  static bool available();  // the drainer's CPU can read the TSC (x86-64)

 private:
  static Pair read_pair();
  void update_rate();
  static uint64_t apply(Pair from, uint64_t t, uint64_t rate, bool backward);

  std::vector<Pair> samples_;
  std::vector<uint64_t> slopes_;  // slopes_[i]: ns per tick from samples_[i] to samples_[i + 1]
  uint64_t rate_ = 0;          // ns per tick, 32.32 fixed point, from the first to the last sample
  uint64_t sample_ticks_ = 0;  // ~10 ms in ticks, from the rate
  // to_ns' last slope from a process' pair (slope_lo_) to the sample above it (slope_hi_).
  mutable Pair slope_lo_{0, 0};
  mutable Pair slope_hi_{0, 0};
  mutable uint64_t slope_lo_hi_ = 0;
  mutable size_t hint_ = 0;  // to_ns' last search: the index of the first sample above its tick
};

}  // namespace spanring
