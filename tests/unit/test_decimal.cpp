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
