// Integers as text for the [STRACE] line: write_decimal (base 10) and write_hex (base 16,
// lowercase), no sign, no leading zeros, "0" for zero: exactly what std::to_chars writes for
// an unsigned value (test_decimal checks them against it).
//
// Why not std::to_chars: a [STRACE] line carries 7 decimal numbers and 2 hex ones, and with
// libstdc++'s to_chars they were ~45% of the text drainer's instructions (callgrind on the demo:
// ~700 Ir per line for the decimals, ~130 for the hex; to_chars counts the digits in a loop, then
// writes two digits per division). These split a number into 8-digit chunks and turn each chunk
// into 8 ASCII bytes at once in a 64-bit register (SWAR): four multiply-shift steps for 8
// decimal digits (the split of P. Khuong, as D. Lemire describes it in "Converting integers to
// fixed-digit representations quickly", 2021), three shift-mask steps for 8 hex digits; the
// leading zeros are counted with one ctz. About 20 instructions for a 13-digit timestamp.
//
// Room: both write up to their largest length (20 decimal, 16 hex digits) at `out`, may write
// bytes past the returned end within that room, and return the end. Pure; any thread.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace spanring {
namespace decimal_detail {

// The 8 decimal digits of v (< 10^8), leading zeros included, as digit values 0..9 in the
// bytes of a little-endian u64, most significant digit in the lowest byte.
inline uint64_t digits8(uint32_t v) noexcept {
  // Lanes of 32 bits: abcd | efgh. (x * 10486) >> 20 is x / 100 for x < 10000 (the error,
  // 24 / (100 * 2^20) per unit, stays under 0.0023 there), and a lane's product (< 2^27)
  // does not reach the next lane.
  uint64_t x = (v / 10000) | (uint64_t{v % 10000} << 32);
  uint64_t q = ((x * 10486) >> 20) & 0x0000007F0000007Full;
  x = q | ((x - 100 * q) << 16);  // lanes of 16 bits: ab | cd | ef | gh
  // (x * 103) >> 10 is x / 10 for x < 100; a lane's product (< 2^14) stays in its lane.
  q = ((x * 103) >> 10) & 0x000F000F000F000Full;
  return q | ((x - 10 * q) << 8);  // bytes: a | b | c | d | e | f | g | h
}

// digits8(a) and digits8(b) (both < 10^8) at once. With SSE2, the two numbers go through one
// set of vector steps (the 8-digit conversion of M. Yi's itoa-benchmark, "sse2", for two
// numbers): a and b split into 4-digit halves by one multiply, each half's four prefixes
// (x / 1000, x / 100, x / 10, x) by two 16-bit high multiplies in parallel, the digits as
// each prefix minus ten times the one before it; ~30 instructions for both, against ~27 for
// each with digits8 (callgrind). A span line converts its start's low digits and its duration
// this way. test_decimal checks it against digits8.
inline void digits8x2(uint32_t a, uint32_t b, uint64_t& da, uint64_t& db) noexcept {
#if defined(__SSE2__)
  // 32-bit lanes [a, 0, b, 0]: _mm_mul_epu32 multiplies lanes 0 and 2 into 64-bit products.
  const __m128i v = _mm_unpacklo_epi64(_mm_cvtsi32_si128(static_cast<int>(a)),
                                       _mm_cvtsi32_si128(static_cast<int>(b)));
  // x / 10000 = (x * 0xd1b71759) >> 45 for x < 10^8 (the product stays under 2^64).
  const __m128i hi = _mm_srli_epi64(_mm_mul_epu32(v, _mm_set1_epi32(static_cast<int>(0xd1b71759u))), 45);
  const __m128i lo = _mm_sub_epi32(v, _mm_mul_epu32(hi, _mm_set1_epi32(10000)));
  // 16-bit lanes [4 hi_a, 4 lo_a, 0, 0, 4 hi_b, 4 lo_b, 0, 0] (each half < 10^4: times 4 stays
  // under 2^16, and no lane reaches the next).
  const __m128i t = _mm_slli_epi64(_mm_or_si128(hi, _mm_slli_epi64(lo, 16)), 2);
  // Each half in four lanes: [4 hi x4, 4 lo x4], one register per number.
  const __m128i ra = _mm_unpacklo_epi32(_mm_unpacklo_epi16(t, t), _mm_unpacklo_epi16(t, t));
  const __m128i rb = _mm_unpacklo_epi32(_mm_unpackhi_epi16(t, t), _mm_unpackhi_epi16(t, t));
  // Lanes x / 1000, x / 100, x / 10, x of each half x: (4x * m >> 16) * s >> 16 with
  // m = 8389, 5243, 13108, 32768 and s = 2^7, 2^11, 2^13, 2^15 (exact for x < 10^4).
  const __m128i m = _mm_set_epi16(static_cast<short>(0x8000), 13108, 5243, 8389,
                                  static_cast<short>(0x8000), 13108, 5243, 8389);
  const __m128i sh = _mm_set_epi16(static_cast<short>(0x8000), 1 << 13, 1 << 11, 1 << 7,
                                   static_cast<short>(0x8000), 1 << 13, 1 << 11, 1 << 7);
  const __m128i ten = _mm_set1_epi16(10);
  auto digits = [&](__m128i r) {
    const __m128i q = _mm_mulhi_epu16(_mm_mulhi_epu16(r, m), sh);  // prefixes
    // Each prefix minus ten times the prefix before it (zero before the first of a half).
    return _mm_sub_epi16(q, _mm_slli_epi64(_mm_mullo_epi16(q, ten), 16));
  };
  // Bytes 0..7: a's digits, most significant first; bytes 8..15: b's.
  const __m128i d = _mm_packus_epi16(digits(ra), digits(rb));
  da = static_cast<uint64_t>(_mm_cvtsi128_si64(d));
  db = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(d, d)));
#else
  da = digits8(a);
  db = digits8(b);
#endif
}

// Writes v (1..10^8 - 1) without leading zeros.
inline char* trimmed8(char* out, uint32_t v) noexcept {
  const uint64_t d = digits8(v);  // v >= 1: some byte is non-zero
  const unsigned zeros = static_cast<unsigned>(__builtin_ctzll(d)) / 8;
  const uint64_t ascii = (d >> (8 * zeros)) + 0x3030303030303030ull;
  std::memcpy(out, &ascii, 8);
  return out + 8 - zeros;
}

inline char* full8(char* out, uint32_t v) noexcept {
  const uint64_t ascii = digits8(v) + 0x3030303030303030ull;
  std::memcpy(out, &ascii, 8);
  return out + 8;
}

// The 8 hex digits of v as values 0..15, most significant in the lowest byte.
inline uint64_t nibbles8(uint32_t v) noexcept {
  uint64_t x = v;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
  x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;  // byte i: nibble i (least significant first)
  return __builtin_bswap64(x);                   // byte i: nibble 7 - i
}

// Digit values 0..15 in each byte to lowercase ASCII.
inline uint64_t hex_ascii(uint64_t x) noexcept {
  // A nibble n > 9 gets 'a' - '0' - 10 = 39 more: n + 6 carries into bit 4 exactly then.
  const uint64_t letters = ((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull;
  return x + 0x3030303030303030ull + letters * 39;
}

// Writes v (1..2^32 - 1) in hex without leading zeros.
inline char* trimmed_hex8(char* out, uint32_t v) noexcept {
  const uint64_t x = nibbles8(v);  // v != 0: some byte is non-zero
  const unsigned zeros = static_cast<unsigned>(__builtin_ctzll(x)) / 8;
  const uint64_t ascii = hex_ascii(x >> (8 * zeros));
  std::memcpy(out, &ascii, 8);
  return out + 8 - zeros;
}

// The digits8 of a + b, given digits8(a) and digits8(b), for a + b < 10^8. With the least
// significant digit in the lowest byte (bswap), one 64-bit add with every byte biased by 246
// carries into the next byte exactly when a digit sum (with its carry in) reaches 10, and the
// carries ripple as in any add; a byte that did not carry keeps its bias (246..255, top bit set;
// one that did holds 0..9), which is taken back out. ~10 instructions against digits8's ~30.
inline uint64_t add_digits8(uint64_t da, uint64_t db) noexcept {
  uint64_t s = __builtin_bswap64(da) + __builtin_bswap64(db) + 0xF6F6F6F6F6F6F6F6ull;
  s -= ((s >> 7) & 0x0101010101010101ull) * 246;
  return __builtin_bswap64(s);
}

// "00" "01" ... "99": the two digits of 0..99 (write_decimal's values 10..99: attribute values,
// mostly, whose records carry many small counts and indices).
inline constexpr char kTwoDigits[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

}  // namespace decimal_detail

// v in decimal at `out` (room for 20 bytes); returns the end.
inline char* write_decimal(char* out, uint64_t v) noexcept {
  using namespace decimal_detail;
  if (v < 10) {
    *out = static_cast<char>('0' + v);
    return out + 1;
  }
  // Two to four digits (attribute values, mostly, which are often small counts and indices)
  // from a table of pairs: ~5 and ~12 instructions, where trimmed8 is ~28.
  if (v < 100) {
    std::memcpy(out, &kTwoDigits[2 * v], 2);
    return out + 2;
  }
  if (v < 10'000) {
    const auto hi = static_cast<uint32_t>(v) / 100;  // 1..99
    const auto lo = static_cast<uint32_t>(v) - 100 * hi;
    // Three digits (hi < 10): hi's pair without its leading '0', the byte after it in the
    // table overwritten by lo's pair one byte earlier.
    const uint32_t three = hi < 10;
    std::memcpy(out, &kTwoDigits[2 * hi + three], 2);
    std::memcpy(out + 2 - three, &kTwoDigits[2 * lo], 2);
    return out + 4 - three;
  }
  if (v < 100'000'000) return trimmed8(out, static_cast<uint32_t>(v));
  if (v < 10'000'000'000'000'000ull) {
    const uint64_t hi = v / 100'000'000;  // 1..99,999,999
    out = hi < 10 ? (*out = static_cast<char>('0' + hi), out + 1)
                  : trimmed8(out, static_cast<uint32_t>(hi));
    return full8(out, static_cast<uint32_t>(v - hi * 100'000'000));
  }
  const uint64_t top = v / 10'000'000'000'000'000ull;  // 1..1844
  const uint64_t rest = v - top * 10'000'000'000'000'000ull;
  const uint64_t mid = rest / 100'000'000;
  out = top < 10 ? (*out = static_cast<char>('0' + top), out + 1)
                 : trimmed8(out, static_cast<uint32_t>(top));
  out = full8(out, static_cast<uint32_t>(mid));
  return full8(out, static_cast<uint32_t>(rest - mid * 100'000'000));
}

// write_decimal for a stream of values that mostly share their leading digits: a [STRACE]
// line's end time and start time (ns since boot, 13-16 digits) agree in every digit above the
// lowest 8 for ~100 ms at a time, line after line. For v in [10^8, 10^16) the digits of
// v / 10^8 are kept from the last value whose quotient they were and copied when the next
// quotient is the same (one compare and an 8-byte copy instead of a trimmed8), and only the low
// 8 digits are converted; anything else is write_decimal. Exactly write_decimal's bytes for
// every value in any order (test_decimal checks it against std::to_chars). Room: 20 bytes at
// `out`, as write_decimal. One instance per thread (it is a cache, not shared).
class DecimalCache {
 public:
  char* write(char* out, uint64_t v) noexcept {
    using namespace decimal_detail;
    constexpr uint64_t kLow = 100'000'000;  // 10^8: the low digits converted every time
    // v - kLow wraps for v < kLow: one unsigned compare tests 10^8 <= v < 10^16.
    if (v - kLow < 10'000'000'000'000'000ull - kLow) {
      const uint64_t hi = v / kLow;  // 1..99,999,999
      if (hi != hi_) {
        hi_ = hi;
        len_ = static_cast<uint32_t>(trimmed8(text_, static_cast<uint32_t>(hi)) - text_);
      }
      std::memcpy(out, text_, 8);  // len_ of them are the digits; the rest is overwritten
      return full8(out + len_, static_cast<uint32_t>(v - hi * kLow));
    }
    return write_decimal(out, v);
  }

  // A span's end (ts + dur), start (ts) and dur as write(ts + dur), write(ts) and
  // write_decimal(dur) write them, from one SpanTimes (span() below).
  class SpanTimes {
   public:
    char* end(char* out) noexcept {
      return fast_ ? put(out, end_digits_) : cache_->write(out, ts_ + dur_);
    }
    char* start(char* out) noexcept {
      return fast_ ? put(out, start_digits_) : cache_->write(out, ts_);
    }
    char* dur(char* out) const noexcept {
      if (!fast_ || dur_ == 0) return write_decimal(out, dur_);
      // dur in [1, 10^8): its digits8 has a non-zero byte; trimmed8's steps from there.
      const unsigned zeros = static_cast<unsigned>(__builtin_ctzll(dur_digits_)) / 8;
      const uint64_t ascii = (dur_digits_ >> (8 * zeros)) + 0x3030303030303030ull;
      std::memcpy(out, &ascii, 8);
      return out + 8 - zeros;
    }

   private:
    friend class DecimalCache;
    // The cache's leading digits, then the 8 low digits `digits` (digits8 form).
    char* put(char* out, uint64_t digits) const noexcept {
      std::memcpy(out, cache_->text_, 8);  // len_ of them are the digits; the rest overwritten
      const uint64_t ascii = digits + 0x3030303030303030ull;
      std::memcpy(out + cache_->len_, &ascii, 8);
      return out + cache_->len_ + 8;
    }
    DecimalCache* cache_;
    uint64_t ts_;
    uint64_t dur_;
    bool fast_ = false;
    uint64_t start_digits_ = 0;
    uint64_t dur_digits_ = 0;
    uint64_t end_digits_ = 0;
  };

  // The digits of span (ts, dur), written by the SpanTimes' end(), start() and dur() in any
  // order while this cache is not used otherwise. When ts is in [10^8, 10^16) and the low 8
  // digits of ts plus dur stay under 10^8 (the end shares ts's leading digits: a span shorter
  // than ~0.1 s, mostly), the end's low digits are the start's plus dur's added digit by digit
  // (add_digits8): one 8-digit conversion less per span; otherwise each number is converted as
  // write() does. test_decimal checks all three against std::to_chars.
  SpanTimes span(uint64_t ts, uint64_t dur) noexcept {
    using namespace decimal_detail;
    constexpr uint64_t kLow = 100'000'000;
    SpanTimes t;
    t.cache_ = this;
    t.ts_ = ts;
    t.dur_ = dur;
    if (ts - kLow < 10'000'000'000'000'000ull - kLow && dur < kLow) {
      const uint64_t hi = ts / kLow;
      const uint64_t lo = ts - hi * kLow;
      if (lo + dur < kLow) {
        if (hi != hi_) {
          hi_ = hi;
          len_ = static_cast<uint32_t>(trimmed8(text_, static_cast<uint32_t>(hi)) - text_);
        }
        t.fast_ = true;
        digits8x2(static_cast<uint32_t>(lo), static_cast<uint32_t>(dur), t.start_digits_,
                  t.dur_digits_);
        t.end_digits_ = add_digits8(t.start_digits_, t.dur_digits_);
      }
    }
    return t;
  }

 private:
  uint64_t hi_ = 0;   // the quotient text_ holds; 0 (no quotient in range is 0): none yet
  uint32_t len_ = 0;  // its digits, 1..8
  char text_[8] = {};
};

// v in lowercase hex at `out` (room for 16 bytes); returns the end.
inline char* write_hex(char* out, uint64_t v) noexcept {
  using namespace decimal_detail;
  if (v < 16) {
    *out = "0123456789abcdef"[v];
    return out + 1;
  }
  const auto hi = static_cast<uint32_t>(v >> 32);
  if (hi == 0) return trimmed_hex8(out, static_cast<uint32_t>(v));
  out = hi < 16 ? (*out = "0123456789abcdef"[hi], out + 1) : trimmed_hex8(out, hi);
  const uint64_t low = hex_ascii(nibbles8(static_cast<uint32_t>(v)));  // all 8, zeros kept
  std::memcpy(out, &low, 8);
  return out + 8;
}

}  // namespace spanring
