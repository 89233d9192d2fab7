// Packed attributes: how a Span stores its integer attributes in a record (kRecordPackedAttrs),
// so that the traced thread copies a few bytes and the drainer formats the decimal text.
//
// A packed attribute list is a sequence of tokens, each:
//   u8   tag      kind << 4 | n, where kind is kPackedUnsigned or kPackedNegative and n (0..8)
//                 is the number of value bytes
//   u8   key_len  0..kAttrsRawMax
//   key_len bytes the key, raw, as given to Span::attr()
//   n    bytes    the value (kPackedUnsigned) or its magnitude (kPackedNegative, 1 <= magnitude
//                 <= 2^63), little-endian, without high zero bytes (0 is n = 0)
// It stands for the raw text an unpacked Span stores: `key=value` for each token, in decimal,
// joined by one space, cut at kAttrsRawMax bytes.
//
// Size: a token's bytes never outnumber its text's (2 + key_len + n against key_len + 1 +
// digits, with digits >= max(n, 1), plus the space before every token but the first), so a list
// of at most kAttrsPackedMax (= kAttrsRawMax + 1) bytes stands for at least as much text as fits
// in kAttrsRawMax bytes. A Span whose next token would not fit unpacks to text (the same bytes)
// and goes on as text.
//
// Both sides: the producer packs (Span, inline) and unpacks on that rare overflow; the drainer
// unpacks every packed record it reads, treating the bytes as untrusted (unpack_attrs checks
// every token). No allocation, no exceptions; any thread.
#pragma once

#include <spanring/segment_layout.h>

#include <charconv>
#include <cstdint>
#include <cstring>

namespace spanring {

inline constexpr uint8_t kPackedUnsigned = 1;  // token kind: the value
inline constexpr uint8_t kPackedNegative = 2;  // token kind: minus the value
inline constexpr uint32_t kPackedTokenFixed = 2;  // bytes of tag and key_len

// Value bytes needed for `v` (0..8): no high zero byte; 0 needs none.
constexpr uint32_t packed_value_bytes(uint64_t v) noexcept {
  return v == 0 ? 0 : (71 - static_cast<uint32_t>(__builtin_clzll(v))) / 8;
}

// Writes one token at `out`: kPackedTokenFixed + key_len + packed_value_bytes(magnitude) bytes,
// but may store up to 8 value bytes, so `out` needs kPackedTokenFixed + key_len + 8 bytes of
// room. Returns the bytes the token takes. `key_len` must be <= kAttrsRawMax.
inline uint32_t pack_token(char* out, const char* key, uint32_t key_len, uint8_t kind,
                           uint64_t magnitude) noexcept {
  const uint32_t n = packed_value_bytes(magnitude);
  out[0] = static_cast<char>(uint32_t{kind} << 4 | n);
  out[1] = static_cast<char>(key_len);
  std::memcpy(out + kPackedTokenFixed, key, key_len);
  std::memcpy(out + kPackedTokenFixed + key_len, &magnitude, 8);  // little-endian (x86-64)
  return kPackedTokenFixed + key_len + n;
}

// One token of a packed list, as next_packed_token() reads it.
struct PackedToken {
  const char* key;   // key_len raw bytes, inside the list
  uint32_t key_len;  // 0..kAttrsRawMax
  bool negative;     // kPackedNegative: the value is minus `magnitude`
  uint64_t magnitude;
};

// Reads and checks the token at in[*at, in_len) (*at < in_len) into `t` and moves *at past it.
// Returns false when it is not a well-formed token: fewer than kPackedTokenFixed bytes left, an
// unknown kind, n > 8, a key_len over kAttrsRawMax, key or value running past in_len, a high
// zero byte in the value, a zero or too large (> 2^63) negative magnitude. The one check of
// untrusted tokens, shared by unpack_attrs and the drainer's faster decoder (record_decode.h).
[[gnu::always_inline]] inline bool next_packed_token(const char* in, uint32_t in_len,
                                                     uint32_t* at, PackedToken& t) noexcept {
  const uint32_t i = *at;
  if (in_len - i < kPackedTokenFixed) return false;
  const uint8_t tag = static_cast<uint8_t>(in[i]);
  const uint32_t key_len = static_cast<uint8_t>(in[i + 1]);
  const uint8_t kind = tag >> 4;
  const uint32_t n = tag & 0x0f;
  if ((kind != kPackedUnsigned && kind != kPackedNegative) || n > 8 || key_len > kAttrsRawMax)
    return false;
  if (in_len - i - kPackedTokenFixed < key_len + n) return false;
  const char* key = in + i + kPackedTokenFixed;
  uint64_t v = 0;
  for (uint32_t b = 0; b < n; ++b)
    v |= uint64_t{static_cast<uint8_t>(key[key_len + b])} << (8 * b);
  if (packed_value_bytes(v) != n) return false;  // a high zero byte: not what pack_token writes
  if (kind == kPackedNegative && (v == 0 || v > (uint64_t{1} << 63))) return false;
  *at = i + kPackedTokenFixed + key_len + n;
  t.key = key;
  t.key_len = key_len;
  t.negative = kind == kPackedNegative;
  t.magnitude = v;
  return true;
}

// The text of the packed list `in` (in_len bytes), cut at `out_cap` bytes, written to `out`.
// Returns its length (<= out_cap), or -1 when `in` is not a well-formed packed list (a token
// next_packed_token refuses). An empty list is well-formed (text "").
inline int32_t unpack_attrs(const char* in, uint32_t in_len, char* out,
                            uint32_t out_cap) noexcept {
  uint32_t i = 0;
  uint32_t o = 0;
  bool first = true;
  auto put = [&](const char* s, uint32_t len) {
    const uint32_t k = len < out_cap - o ? len : out_cap - o;
    std::memcpy(out + o, s, k);
    o += k;
  };
  while (i < in_len) {
    PackedToken t;
    if (!next_packed_token(in, in_len, &i, t)) return -1;
    // [" "]key=[-]digits; text past out_cap is cut, but every token is still checked.
    if (!first) put(" ", 1);
    first = false;
    put(t.key, t.key_len);
    char num[22];
    char* p = num;
    *p++ = '=';
    if (t.negative) *p++ = '-';
    p = std::to_chars(p, num + sizeof num, t.magnitude).ptr;
    put(num, static_cast<uint32_t>(p - num));
  }
  return static_cast<int32_t>(o);
}

}  // namespace spanring
