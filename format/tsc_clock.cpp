#include "format/tsc_clock.h"

#include <spanring/thread_state.h>

#include <time.h>

#include <algorithm>
#include <stdexcept>

namespace spanring {
namespace {

__extension__ typedef unsigned __int128 u128;  // 64x64 -> 128-bit products

constexpr uint64_t kSampleEveryNs = 10'000'000;  // 10 ms

// The producer's counter: the TSC, or cntvct_el0 on aarch64 (the one read_tsc the producer
// inlines, include/spanring/thread_state.h).
uint64_t rdtsc() { return detail::read_tsc(); }

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// ns per tick between two pairs, 32.32 fixed point (0 when they do not rise together).
uint64_t slope(TscClock::Pair a, TscClock::Pair b) {
  if (b.tsc <= a.tsc || b.ns < a.ns) return 0;
  const u128 r = (u128(b.ns - a.ns) << 32) / (b.tsc - a.tsc);
  return r > UINT64_MAX ? UINT64_MAX : uint64_t(r);
}

}  // namespace

bool TscClock::available() {
#if defined(__x86_64__) || defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

TscClock::Pair TscClock::read_pair() {
  // The pair whose two TSC reads are closest together: the one least disturbed by an interrupt.
  Pair best{0, 0};
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const uint64_t a = rdtsc();
    const uint64_t ns = mono_ns();
    const uint64_t b = rdtsc();
    if (b - a < best_gap) {
      best_gap = b - a;
      best = Pair{a + (b - a) / 2, ns};
    }
  }
  return best;
}

TscClock::TscClock() {
  if (!available()) return;
  samples_.push_back(read_pair());
  const timespec two_ms{0, 2'000'000};
  nanosleep(&two_ms, nullptr);
  add(read_pair());
}

TscClock::TscClock(std::vector<Pair> samples) {
  for (const Pair& p : samples) {
    if (samples_.empty()) samples_.push_back(p);
    else add(p);
  }
  if (samples_.size() < 2) throw std::invalid_argument("TscClock needs two rising samples");
}

void TscClock::update_rate() {
  rate_ = slope(samples_.front(), samples_.back());
  sample_ticks_ = rate_ == 0 ? 1 : uint64_t((u128(kSampleEveryNs) << 32) / rate_);
}

void TscClock::clear() noexcept {
  samples_.clear();
  slopes_.clear();
  rate_ = 0;
  sample_ticks_ = 0;
  slope_lo_ = slope_hi_ = Pair{0, 0};
  slope_lo_hi_ = 0;
  hint_ = 0;
}

bool TscClock::add(Pair p) {
  if (!samples_.empty() && (p.tsc <= samples_.back().tsc || p.ns < samples_.back().ns))
    return false;
  if (samples_.size() == kMaxSamples) {
    // Keep every other sample and the last: the same span of time at half the resolution.
    size_t out = 0;
    for (size_t i = 0; i < samples_.size(); i += 2) samples_[out++] = samples_[i];
    if (samples_[out - 1].tsc != samples_.back().tsc) samples_[out++] = samples_.back();
    samples_.resize(out);
    slopes_.clear();
    for (size_t i = 1; i < samples_.size(); ++i) slopes_.push_back(slope(samples_[i - 1], samples_[i]));
  }
  if (!samples_.empty()) slopes_.push_back(slope(samples_.back(), p));
  samples_.push_back(p);
  update_rate();
  return true;
}

bool TscClock::maybe_sample() {
  if (samples_.empty()) return false;
  if (rdtsc() - samples_.back().tsc >= sample_ticks_) return add(read_pair());
  return false;
}

uint64_t TscClock::to_ns(uint64_t t, Pair anchor) const {
  const bool use_anchor = anchor.tsc != 0 && anchor.tsc <= t;
  if (samples_.empty()) return use_anchor ? anchor.ns : 0;  // no TSC on this machine
  // The nearest samples below (lo) and above (hi) t: the first sample above t, found by a
  // binary search over up to kMaxSamples pairs unless t lies past the last sample or in the
  // interval where the previous search ended (ticks come nearly in order, a ring at a time).
  // With the search for every tick, callgrind counted ~130 instructions per conversion (two
  // per span) on the demo.
  const size_t n = samples_.size();
  size_t hi = n;
  if (t < samples_[n - 1].tsc) {
    const size_t h = hint_ < n ? hint_ : n - 1;
    if (t < samples_[h].tsc && (h == 0 || t >= samples_[h - 1].tsc)) {
      hi = h;
    } else {
      hi = size_t(std::upper_bound(samples_.begin(), samples_.end(), t,
                                   [](uint64_t v, const Pair& p) { return v < p.tsc; }) -
                  samples_.begin());
      hint_ = hi;
    }
  }
  const auto hi_it = samples_.begin() + static_cast<std::ptrdiff_t>(hi);
  const bool has_lo = hi_it != samples_.begin();
  Pair lo = has_lo ? *(hi_it - 1) : Pair{0, 0};
  bool lo_ok = has_lo;
  if (use_anchor && (!lo_ok || anchor.tsc > lo.tsc)) {
    lo = anchor;  // the process' own pair is nearer
    lo_ok = true;
  }
  uint64_t ns;
  if (lo_ok && hi_it != samples_.end()) {
    // Between two samples: their precomputed slope, unless the anchor is the lower pair.
    uint64_t s;
    if (has_lo && lo.tsc == samples_[hi - 1].tsc) {
      s = slopes_[hi - 1];
    } else {
      // From a process' pair to the next sample: a 128-bit division, the same for all of that
      // process' ticks in this interval, so the last one is kept.
      if (lo.tsc != slope_lo_.tsc || lo.ns != slope_lo_.ns || hi_it->tsc != slope_hi_.tsc ||
          hi_it->ns != slope_hi_.ns) {
        slope_lo_ = lo;
        slope_hi_ = *hi_it;
        slope_lo_hi_ = slope(lo, *hi_it);
      }
      s = slope_lo_hi_;
    }
    ns = apply(lo, t, s, false);
  } else if (lo_ok) {
    ns = apply(lo, t, rate_, false);
  } else {
    ns = apply(*hi_it, t, rate_, true);
  }
  if (use_anchor && ns < anchor.ns) ns = anchor.ns;
  return ns;
}

TscClock::Interval TscClock::span_ns(uint64_t t, uint64_t dur, Pair anchor) const {
  // The common case, inline: both ends at or past the last sample (a span published since the
  // drainer's last sample, ~10 ms ago) and none before the process' pair. What to_ns does for
  // each end then, with its lookups done once: extrapolation at rate_ from the nearer of the
  // last sample and the process' pair, never below that pair. Two calls to to_ns cost ~200
  // instructions per span on the demo (callgrind), this ~40.
  if (!samples_.empty() && t >= samples_.back().tsc && t + dur >= t &&
      (anchor.tsc == 0 || anchor.tsc <= t)) {
    const bool use_anchor = anchor.tsc != 0;
    const Pair lo = use_anchor && anchor.tsc > samples_.back().tsc ? anchor : samples_.back();
    uint64_t start = apply(lo, t, rate_, false);
    uint64_t end = apply(lo, t + dur, rate_, false);
    if (use_anchor && start < anchor.ns) start = anchor.ns;
    if (use_anchor && end < anchor.ns) end = anchor.ns;
    return Interval{start, end > start ? end - start : 0};
  }
  const uint64_t start = to_ns(t, anchor);
  const uint64_t end = to_ns(t + dur < t ? UINT64_MAX : t + dur, anchor);
  return Interval{start, end > start ? end - start : 0};
}

}  // namespace spanring
