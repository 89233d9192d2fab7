// write_decimal and write_hex (src/decimal.h) against std::to_chars, the library they stand
// in for: the same bytes for every length, every digit position, both ends of the range.
#include "src/decimal.h"

#include <doctest/doctest.h>

#include <charconv>
#include <cstring>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace spanring;

namespace {

std::string library(uint64_t v, int base) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v, base).ptr);
}

std::string ours(uint64_t v, int base) {
  // The room both promise (20 and 16 bytes), with guard bytes after it that must stay as
  // they are: nothing is written past that room.
  char buf[24];
  std::memset(buf, '#', sizeof buf);
  const size_t room = base == 10 ? 20 : 16;
  char* end = base == 10 ? write_decimal(buf, v) : write_hex(buf, v);
  for (size_t i = room; i < sizeof buf; ++i) REQUIRE(buf[i] == '#');
  REQUIRE(end > buf);
  REQUIRE(static_cast<size_t>(end - buf) <= room);
  return std::string(buf, end);
}

// Every power of the base, one below and one above it, every power of two and its
// neighbours, and the ends of the range: every length and every chunk boundary.
std::vector<uint64_t> edge_values(uint64_t base) {
  std::vector<uint64_t> v{0, 1, UINT64_MAX, UINT64_MAX - 1, UINT32_MAX, uint64_t{UINT32_MAX} + 1};
  for (uint64_t p = 1;; p *= base) {
    v.insert(v.end(), {p - 1, p, p + 1, 9 * p, 10 * p - 1});
    if (p > UINT64_MAX / base) break;
  }
  for (int b = 0; b < 64; ++b) {
    const uint64_t p = uint64_t{1} << b;
    v.insert(v.end(), {p - 1, p, p + 1});
  }
  return v;
}

}  // namespace

TEST_CASE("write_decimal writes what std::to_chars writes, at every length and boundary") {
  for (const uint64_t v : edge_values(10)) CHECK(ours(v, 10) == library(v, 10));
  for (uint64_t v = 0; v < 100'000; ++v) REQUIRE(ours(v, 10) == library(v, 10));
}

TEST_CASE("write_hex writes what std::to_chars writes in base 16, lowercase") {
  for (const uint64_t v : edge_values(16)) CHECK(ours(v, 16) == library(v, 16));
  for (uint64_t v = 0; v < 100'000; ++v) REQUIRE(ours(v, 16) == library(v, 16));
}

TEST_CASE("random values of every bit length agree with std::to_chars in both bases") {
  std::mt19937_64 rng(20261211);
  for (int i = 0; i < 200'000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);  // every magnitude, not only 20-digit values
    REQUIRE(ours(v, 10) == library(v, 10));
    REQUIRE(ours(v, 16) == library(v, 16));
  }
}

TEST_CASE("DecimalCache writes what std::to_chars writes, whatever came before") {
  // The cache keeps the digits of the last v / 10^8: values in and out of its range [10^8,
  // 10^16), repeats, neighbours across a quotient boundary and random values, in one stream.
  DecimalCache cache;
  auto check = [&](uint64_t v) {
    char buf[24];
    std::memset(buf, '#', sizeof buf);
    char* end = cache.write(buf, v);
    for (size_t i = 20; i < sizeof buf; ++i) REQUIRE(buf[i] == '#');
    REQUIRE(std::string(buf, end) == library(v, 10));
  };
  for (const uint64_t v : edge_values(10)) {
    check(v);
    check(v);  // the same quotient again: from the cache
  }
  std::mt19937_64 rng(0xdec1a1);
  uint64_t v = 2'022'531'972'882;
  for (int i = 0; i < 200'000; ++i) {
    const uint64_t r = rng();
    if (r % 11 == 0) v = rng() >> (rng() % 64);          // any length
    else if (r % 11 == 1) v = (v / 100'000'000 + 1) * 100'000'000 - (r >> 40) % 3;  // a boundary
    else v += (r >> 16) % 50'000'000;                     // mostly the same quotient
    check(v);
  }
}

TEST_CASE("add_digits8 gives the digits of a sum under 10^8 for any carry chain") {
  using decimal_detail::add_digits8;
  using decimal_detail::digits8;
  auto check = [](uint32_t a, uint32_t b) {
    REQUIRE(a + b < 100'000'000u);
    const uint64_t got = add_digits8(digits8(a), digits8(b));
    if (got != digits8(a + b)) FAIL("add_digits8(", a, ", ", b, ") is not the digits of ", a + b);
  };
  // Every carry chain: 10^k - 1 plus 1..10 ripples through k digits.
  for (uint32_t p = 1; p < 100'000'000u; p *= 10)
    for (uint32_t d = 1; d <= 10 && p - 1 + d < 100'000'000u; ++d) {
      check(p - 1, d);
      check(d, p - 1);
    }
  check(99'999'999, 0);
  check(0, 0);
  check(49'999'999, 50'000'000);
  std::mt19937 rng(0xadd8);
  for (int i = 0; i < 1'000'000; ++i) {
    const uint32_t a = rng() % 100'000'000u;
    const uint32_t b = (rng() % 2 ? rng() % (100'000'000u - a) : rng() % 1000u) % (100'000'000u - a);
    check(a, b);
  }
}

TEST_CASE("digits8x2 gives digits8 of both numbers, at every digit position and boundary") {
  using decimal_detail::digits8;
  using decimal_detail::digits8x2;
  auto check = [](uint32_t a, uint32_t b) {
    uint64_t da = 0;
    uint64_t db = 0;
    digits8x2(a, b, da, db);
    if (da != digits8(a) || db != digits8(b))
      FAIL("digits8x2(", a, ", ", b, ") is not digits8 of each");
  };
  // Every digit 0..9 at every position, the halves' boundaries (x / 10^4), both ends.
  std::vector<uint32_t> edges{0, 1, 9'999, 10'000, 10'001, 99'999'999, 12'345'678, 87'654'321};
  for (uint32_t p = 1; p < 100'000'000u; p *= 10)
    for (uint32_t d = 0; d <= 9; ++d) edges.insert(edges.end(), {d * p, d * p + p - 1});
  for (const uint32_t a : edges)
    for (const uint32_t b : edges) check(a, b);
  std::mt19937 rng(0xd8a2);
  for (int i = 0; i < 2'000'000; ++i) check(rng() % 100'000'000u, rng() % 100'000'000u);
}

TEST_CASE("DecimalCache::span writes a span's end, start and dur as std::to_chars does") {
  // Spans whose end shares the start's leading digits (the digit-by-digit sum), spans that
  // cross a 10^8 boundary, times outside [10^8, 10^16), long and zero durations, the three
  // numbers written in different orders, interleaved with plain write() on the same cache.
  DecimalCache cache;
  auto check = [&](uint64_t ts, uint64_t dur, int order) {
    DecimalCache::SpanTimes t = cache.span(ts, dur);
    char end[24], start[24], d[24];
    std::memset(end, '#', sizeof end);
    std::memset(start, '#', sizeof start);
    std::memset(d, '#', sizeof d);
    char* e_end = nullptr;
    char* s_end = nullptr;
    char* d_end = nullptr;
    if (order == 0) {
      e_end = t.end(end);
      s_end = t.start(start);
      d_end = t.dur(d);
    } else {
      d_end = t.dur(d);
      s_end = t.start(start);
      e_end = t.end(end);
    }
    for (size_t i = 20; i < 24; ++i) REQUIRE((end[i] == '#' && start[i] == '#' && d[i] == '#'));
    const std::string want_end = library(ts + dur, 10);
    if (std::string(end, e_end) != want_end || std::string(start, s_end) != library(ts, 10) ||
        std::string(d, d_end) != library(dur, 10))
      FAIL("span ts=", ts, " dur=", dur, ": end '", std::string(end, e_end), "' start '",
           std::string(start, s_end), "' dur '", std::string(d, d_end), "'");
  };
  const uint64_t edges[] = {0, 1, 9, 10, 99'999'999, 100'000'000, 100'000'001, 199'999'999,
                            12'776'399'999'999, 12'776'400'000'000, 9'999'999'999'999'999ull,
                            10'000'000'000'000'000ull, UINT64_MAX / 2};
  const uint64_t durs[] = {0, 1, 9, 10, 11, 99, 12'345, 99'999'999, 100'000'000, 1ull << 40};
  for (const uint64_t ts : edges)
    for (const uint64_t dur : durs) {
      check(ts, dur, 0);
      check(ts, dur, 1);
    }
  std::mt19937_64 rng(0x5ba7);
  uint64_t ts = 12'776'320'282'962;
  for (int i = 0; i < 300'000; ++i) {
    const uint64_t r = rng();
    if (r % 13 == 0) ts = rng() >> (rng() % 64);
    else if (r % 13 == 1) ts = (ts / 100'000'000 + 1) * 100'000'000 - (r >> 40) % 1000;
    else ts += (r >> 16) % 5'000'000;
    const uint64_t dur = r % 7 == 0 ? rng() >> (rng() % 64) : (r >> 24) % 3'000'000;
    if (ts + dur < ts) continue;  // the end wraps: no such span
    check(ts, dur, static_cast<int>(r >> 63));
    if (r % 5 == 0) {  // the plain writes share the cache's leading digits
      char buf[24];
      REQUIRE(std::string(buf, cache.write(buf, ts + 7)) == library(ts + 7, 10));
    }
  }
}
