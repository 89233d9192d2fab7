// [STRACE] field encoding and truncation; see include/spanring/encode.h and
// shared/strace-format.md. The drainer runs this once per record, so it works on raw bytes with
// a 256-entry class table instead of per-byte branches on ranges.
#include <spanring/encode.h>

#include <array>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace spanring {
namespace {

// 0 = escape as %XX, 1 = copy as is. Built for names; attributes also copy ' ' and '='.
constexpr std::array<uint8_t, 256> make_copy_table(bool attrs) {
  std::array<uint8_t, 256> t{};
  for (int c = 0x20; c <= 0x7e; ++c) t[c] = 1;
  t['%'] = 0;
  t['['] = 0;
  t[']'] = 0;
  if (!attrs) {
    t[' '] = 0;
    t['='] = 0;
  }
  return t;
}
constexpr auto kNameCopy = make_copy_table(false);
constexpr auto kAttrsCopy = make_copy_table(true);
constexpr char kHex[] = "0123456789ABCDEF";

// When every byte of in[0, len) is copied as is (no escape, no NUL), copies them to `out` and
// returns true: the field is its input. Most names and attributes are. Otherwise returns false
// with `out` partly written (the caller then encodes the field from its start).
//
// SSE2 checks 16 bytes at a time (the same classes as the table) and stores each checked
// vector; the last, partial vector is a load of the field's last 16 bytes, overlapping the one
// before it, and a field of 8..15 bytes is two overlapping 8-byte loads. Checking only the
// whole vectors and the rest byte by byte through the table, then a memcpy, cost ~220
// instructions for the demo's name and attributes per line (callgrind); this ~half.
bool copy_if_plain(const char* in, size_t len, char* out, const std::array<uint8_t, 256>& copy,
                   bool attrs) noexcept {
#if defined(__SSE2__)
  const __m128i lo = _mm_set1_epi8(0x1f);
  const __m128i hi = _mm_set1_epi8(0x7f);
  const __m128i pct = _mm_set1_epi8('%');
  const __m128i lb = _mm_set1_epi8('[');
  const __m128i rb = _mm_set1_epi8(']');
  const __m128i sp = _mm_set1_epi8(attrs ? '%' : ' ');  // attributes copy ' ' and '='
  const __m128i eq = _mm_set1_epi8(attrs ? '%' : '=');
  // Whether all 16 bytes of v are copied as is.
  auto plain = [&](__m128i v) {
    // Signed compares: 0x80..0xff are negative, so "> 0x1f and < 0x7f" is 0x20..0x7e.
    const __m128i printable = _mm_and_si128(_mm_cmpgt_epi8(v, lo), _mm_cmplt_epi8(v, hi));
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, pct), _mm_cmpeq_epi8(v, lb)),
                     _mm_or_si128(_mm_cmpeq_epi8(v, rb),
                                  _mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, eq))));
    return _mm_movemask_epi8(_mm_andnot_si128(special, printable)) == 0xffff;
  };
  if (len >= 16) {
    for (size_t i = 0; i + 16 < len; i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
      if (!plain(v)) return false;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), v);
    }
    const __m128i last = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + len - 16));
    if (!plain(last)) return false;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + len - 16), last);
    return true;
  }
  if (len >= 8) {
    uint64_t a, b;
    std::memcpy(&a, in, 8);
    std::memcpy(&b, in + len - 8, 8);
    if (!plain(_mm_set_epi64x(static_cast<long long>(a), static_cast<long long>(b))))
      return false;
    std::memcpy(out, &a, 8);
    std::memcpy(out + len - 8, &b, 8);
    return true;
  }
#else
  (void)attrs;
#endif
  for (size_t i = 0; i < len; ++i) {
    if (!copy[static_cast<uint8_t>(in[i])]) return false;
    out[i] = in[i];
  }
  return true;
}

size_t encode(const char* in, size_t len, char* out, size_t cap,
              const std::array<uint8_t, 256>& copy, bool attrs) noexcept {
  if (len <= cap && copy_if_plain(in, len, out, copy, attrs)) return len;
  size_t n = 0;
  size_t last_unit = 0;  // size of the last unit appended
  for (size_t i = 0; i < len; ++i) {
    const auto b = static_cast<uint8_t>(in[i]);
    if (b == 0) return n;  // input ends at the first NUL: everything fit
    const size_t unit = copy[b] ? 1 : 3;
    if (n + unit > cap) {
      // The input did not fit. At the cap, the whole last unit goes (never half an escape);
      // then `~` marks the cut, so a cut field is at most `cap` bytes and ends in `~`.
      if (n == cap) n -= last_unit;
      out[n++] = '~';
      return n;
    }
    if (unit == 1) {
      out[n] = static_cast<char>(b);
    } else {
      out[n] = '%';
      out[n + 1] = kHex[b >> 4];
      out[n + 2] = kHex[b & 0xf];
    }
    n += unit;
    last_unit = unit;
  }
  return n;
}

}  // namespace

size_t encode_name(const char* in, size_t len, char* out) noexcept {
  return encode(in, len, out, kNameCap, kNameCopy, false);
}

size_t encode_attrs(const char* in, size_t len, char* out) noexcept {
  return encode(in, len, out, kAttrsCap, kAttrsCopy, true);
}

bool is_device_attrs(std::string_view attrs) noexcept {
  size_t at = 0;
  while ((at = attrs.find("clk=dev", at)) != std::string_view::npos) {
    const bool starts = at == 0 || attrs[at - 1] == ' ';
    const bool ends = at + 7 == attrs.size() || attrs[at + 7] == ' ';
    if (starts && ends) return true;
    at += 7;
  }
  return false;
}

}  // namespace spanring
