// The producer's clock: whether Spans read the TSC, and the process' clock anchor (the pair
// of clock readings the drainer converts TSC ticks and wall time from).
#include "src/producer.h"

#include <spanring/span.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace spanring {
namespace {

// Whether the CPU's TSC runs at a constant rate in every state (CPUID 0x80000007 EDX bit 8,
// "invariant TSC", the same bit on Intel and AMD), so that ticks convert linearly to
// CLOCK_MONOTONIC; on aarch64 whether the generic timer's counter (read_tsc) is set up.
// SPANRING_CLOCK=monotonic forces clock_gettime.
bool invariant_tsc() noexcept {
#if defined(__x86_64__)
  const char* clock = std::getenv("SPANRING_CLOCK");
  if (clock != nullptr && std::strcmp(clock, "monotonic") == 0) return false;
  unsigned a, b, c, d;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) == 0 || a < 0x80000007) return false;
  __get_cpuid(0x80000007, &a, &b, &c, &d);
  return (d & (1u << 8)) != 0;
#elif defined(__aarch64__)
  // The generic timer runs at a constant rate by definition (ARM ARM D11.1.2); a zero
  // cntfrq_el0 means firmware left it unset, and then the counter is not trusted either.
  const char* clock = std::getenv("SPANRING_CLOCK");
  if (clock != nullptr && std::strcmp(clock, "monotonic") == 0) return false;
  uint64_t freq;
  asm volatile("mrs %0, cntfrq_el0" : "=r"(freq));
  return freq != 0;
#else
  return false;
#endif
}

}  // namespace

int64_t clock_ns(clockid_t id) noexcept {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void take_anchor(ProcessState& p) noexcept {
  // Read CLOCK_MONOTONIC around CLOCK_REALTIME and pair the realtime reading with the midpoint.
  // The first clock reads of a process may fault in the vDSO's pages (microseconds): these
  // reads come after the warm-up of the first one.
  clock_ns(CLOCK_REALTIME);
  const int64_t m0 = clock_ns(CLOCK_MONOTONIC);
  const int64_t w = clock_ns(CLOCK_REALTIME);
  const int64_t m1 = clock_ns(CLOCK_MONOTONIC);
  p.anchor_mono_ns = static_cast<uint64_t>(m0 + (m1 - m0) / 2);
  p.anchor_wall_ns = static_cast<uint64_t>(w);
  p.use_tsc = invariant_tsc();
  p.anchor_tsc = 0;
  if (p.use_tsc) {
    // The TSC read around CLOCK_MONOTONIC, five times; the try with the closest TSC reads (the
    // least disturbed by an interrupt) gives the pair (midpoint of its TSC reads, its mono).
    uint64_t best_gap = UINT64_MAX;
    for (int i = 0; i < 5; ++i) {
      const uint64_t t0 = read_tsc();
      const int64_t m = clock_ns(CLOCK_MONOTONIC);
      const uint64_t t1 = read_tsc();
      if (t1 - t0 < best_gap) {
        best_gap = t1 - t0;
        p.anchor_tsc = t0 + (t1 - t0) / 2;
        // The anchor moves to this read of the monotonic clock, keeping its wall - mono offset.
        p.anchor_wall_ns = static_cast<uint64_t>(w + (m - (m0 + (m1 - m0) / 2)));
        p.anchor_mono_ns = static_cast<uint64_t>(m);
      }
    }
  }
  p.anchor_origin = 0;
}

int64_t now_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }

}  // namespace spanring
