// TscClock: converts TSC ticks, as kRecordTsc records and open spans carry them
// (include/spanring/segment_layout.h), to CLOCK_MONOTONIC ns. The drainer samples the clock;
// a binary trace of version 4 carries its samples (event 9, docs/binary-format.md), and the
// reader replays them into a TscClock of its own (TscClock(Replay)) to convert a run's TSC
// times exactly as the drainer would have at the point of the file where the run is.
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
  // A reader's clock: no sample (to_ns then gives the anchor's ns or 0, as a drainer on a
  // machine without a TSC does); samples come from the file through add() and clear().
  struct Replay {};
  explicit TscClock(Replay) noexcept {}

  // Takes a sample if the last one is older than kSampleTicks (one rdtsc otherwise). True when
  // it added one (then samples().back() is it).
  bool maybe_sample();
  // Adds a sample (maybe_sample uses it; a reader replays a file's samples through it). Ignored
  // (false) unless its tsc is above and its ns not below the last sample's. When the clock
  // holds kMaxSamples, every other sample is dropped first: the same sequence of add() calls
  // gives the same samples, whoever makes them.
  bool add(Pair p);
  // Forgets every sample (a reader, before a file's full clock state).
  void clear() noexcept;
  // The samples, oldest first (at most kMaxSamples; tsc rising, ns not falling).
  const std::vector<Pair>& samples() const noexcept { return samples_; }

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

  // span_ns() for many spans of one process (one run of a binary trace): the common case, both
  // ends at or past the later of the last sample and the anchor, precomputed once; the result is
  // span_ns()'s exactly. Valid while the clock is not changed (no add() or clear()).
  class Spans {
   public:
    Spans(const TscClock& clock, Pair anchor) noexcept : clock_(clock), anchor_(anchor) {
      if (clock.samples_.empty()) return;  // every span the slow way (to_ns: no samples)
      const Pair last = clock.samples_.back();
      use_anchor_ = anchor.tsc != 0;
      lo_ = use_anchor_ && anchor.tsc > last.tsc ? anchor : last;
      rate_ = clock.rate_;
      fast_ = true;
      // 64-bit products suffice when both ends lie within 2^32 ticks of lo_ and the rate is
      // below 2^31 (a counter above 2 GHz... or any below, whose ticks are longer: then the
      // 128-bit way): (2^33 ticks) x rate < 2^64, and lo_.ns + 2^33 cannot wrap. The results
      // are apply()'s exactly. The clamps to the anchor's ns only bite when lo_ is a sample
      // below it (lo_ the anchor, or a sample at or above its ns: each end is at least lo_.ns).
      // The inline case needs the 64-bit products and no clamp: one flag, tested once a span.
      inline_ok_ = rate_ < (uint64_t{1} << 31) && lo_.ns < UINT64_MAX - (uint64_t{1} << 34) &&
                   lo_.tsc < UINT64_MAX - (uint64_t{1} << 34) &&
                   !(use_anchor_ && lo_.ns < anchor.ns);
      // Ticks between the last two samples (a span that started before the drainer's last
      // sample): to_ns() interpolates on their slope, from the lower one, when the anchor is
      // not inside that interval; the search and slope lookups done once here.
      const size_t n = clock.samples_.size();
      if (n >= 2 && (anchor.tsc == 0 || anchor.tsc <= clock.samples_[n - 2].tsc)) {
        prev_ = clock.samples_[n - 2];
        prev_slope_ = clock.slopes_[n - 2];
        last_ = last;
        prev_ok_ = true;
        // The same in 64-bit products, inline (most of a run's spans in the demo start between
        // the last two samples: the drainer samples as it polls, then writes what started
        // before): exact when the interval, the duration and both rates are below 2^32 and no
        // clamp can bite (every end is at least prev_.ns, at least the anchor's ns).
        prev_len_ = last.tsc - prev_.tsc;
        prev_inline_ = prev_len_ < (uint64_t{1} << 32) && prev_slope_ < (uint64_t{1} << 32) &&
                       rate_ < (uint64_t{1} << 32) && last.ns < UINT64_MAX - (uint64_t{1} << 33) &&
                       !(use_anchor_ && anchor.ns > prev_.ns);
      }
    }
    // The common case (a span within 2^32 ticks past the last sample) inline, the rest out of
    // line: GCC stopped inlining the whole operator into the text drainer's loop, and the call
    // was ~28 instructions a record there (callgrind, the demo).
    [[gnu::always_inline]] Interval operator()(uint64_t t, uint64_t dur) const noexcept {
      const uint64_t d = t - lo_.tsc;
      if (__builtin_expect(inline_ok_ && t >= lo_.tsc && ((d | dur) >> 32) == 0, 1)) {
        const uint64_t start = lo_.ns + ((d * rate_) >> 32);
        const uint64_t end = lo_.ns + (((d + dur) * rate_) >> 32);
        return Interval{start, end - start};  // end >= start: the product does not fall
      }
      // Between the last two samples (other()'s second case, apply()'s results exactly: the
      // products stay below 2^64 and the sums below 2^64 - 2^32, so nothing saturates).
      const uint64_t dp = t - prev_.tsc;  // wraps for t below prev_: one compare tests both
      if (__builtin_expect(prev_inline_ && dp < prev_len_ && (dur >> 32) == 0, 1)) {
        const uint64_t start = prev_.ns + ((dp * prev_slope_) >> 32);
        const uint64_t e = dp + dur;
        const uint64_t end = e < prev_len_ ? prev_.ns + ((e * prev_slope_) >> 32)
                                           : last_.ns + (((e - prev_len_) * rate_) >> 32);
        return Interval{start, end > start ? end - start : 0};
      }
      return other(t, dur);
    }

   private:
    [[gnu::noinline]] Interval other(uint64_t t, uint64_t dur) const noexcept {
      if (fast_ && t >= lo_.tsc && t + dur >= t) {
        uint64_t start = apply(lo_, t, rate_, false);
        uint64_t end = apply(lo_, t + dur, rate_, false);
        if (use_anchor_ && start < anchor_.ns) start = anchor_.ns;
        if (use_anchor_ && end < anchor_.ns) end = anchor_.ns;
        return Interval{start, end > start ? end - start : 0};
      }
      if (prev_ok_ && t >= prev_.tsc && t < last_.tsc && t + dur >= t) {
        // What span_ns() gives through to_ns() for both ends (docs/binary-format.md, Version 4).
        uint64_t start = apply(prev_, t, prev_slope_, false);
        const uint64_t e = t + dur;
        uint64_t end = e < last_.tsc ? apply(prev_, e, prev_slope_, false)
                                     : apply(last_, e, rate_, false);
        if (use_anchor_ && start < anchor_.ns) start = anchor_.ns;
        if (use_anchor_ && end < anchor_.ns) end = anchor_.ns;
        return Interval{start, end > start ? end - start : 0};
      }
      return clock_.span_ns(t, dur, anchor_);
    }

   private:
    const TscClock& clock_;
    Pair anchor_;
    Pair lo_{0, 0};
    uint64_t rate_ = 0;
    bool use_anchor_ = false;
    bool fast_ = false;
    bool inline_ok_ = false;  // operator()'s inline case may be taken: 64-bit, no clamp
    Pair prev_{0, 0};  // the sample before the last, when prev_ok_
    Pair last_{0, 0};
    uint64_t prev_slope_ = 0;
    bool prev_ok_ = false;
    uint64_t prev_len_ = 0;     // last_.tsc - prev_.tsc, when prev_ok_
    bool prev_inline_ = false;  // operator()'s second inline case may be taken
  };

  // ns per tick of the extrapolation rate, as 32.32 fixed point; for diagnostics.
  uint64_t rate_fixed() const { return rate_; }
  static bool available();  // the drainer's CPU can read the TSC (x86-64)

 private:
  static Pair read_pair();
  void update_rate();
  static uint64_t apply(Pair from, uint64_t t, uint64_t rate, bool backward) noexcept {
    if (!backward) return saturating_add(from.ns, (u128(t - from.tsc) * rate) >> 32);
    const u128 back = (u128(from.tsc - t) * rate) >> 32;
    return back >= from.ns ? 0 : from.ns - uint64_t(back);
  }
  __extension__ typedef unsigned __int128 u128;  // 64x64 -> 128-bit products
  static uint64_t saturating_add(uint64_t a, u128 b) noexcept {
    const u128 s = u128(a) + b;
    return s > UINT64_MAX ? UINT64_MAX : uint64_t(s);
  }

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
