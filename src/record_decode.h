// Decoding one ring record (RecordHeader or CompactRecord, segment_layout.h) into the RecordCopy
// every output format takes: the one place where the drainer's ring reader (src/ring.h, for the
// [STRACE] text path and the first record of an owner) and every binary reader (event 8 of
// format/binary_format.h, a run of ring records copied as they are) turn slots into a record.
// Both paths going through these functions is what makes `convert` of a version-3 file
// byte-identical to the text drainer's output.
//
// Input is untrusted (shared memory, or a file): every function checks what it reads and says
// why in `why` on failure (messages start with `where`, e.g. "record at slot 12"). Plain
// functions over private copies; any thread; no allocation on success.
#pragma once

#include "src/decimal.h"
#include "src/record_copy.h"

#include <spanring/packed_attrs.h>
#include <spanring/segment_layout.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace spanring {

// Where a record is, for a message: `prefix` a, then `mid` b when mid is set ("compact record
// seq " 7 " at slot " 12). Built into text only when a check fails: no cost per record.
struct RecordWhere {
  const char* prefix;
  uint64_t a;
  const char* mid = nullptr;
  uint64_t b = 0;
  std::string str() const {
    std::string s = prefix + std::to_string(a);
    if (mid != nullptr) s += mid + std::to_string(b);
    return s;
  }
};

// The framing of an ordinary record header `h` (not kRecordCompact): slot count 1..kMaxRecordSlots
// and within `avail` slots, lengths within bounds and matching the slot count, known flags with
// at most one marker bit (a marker carries no payload and no TSC flag, a reentrant marker a count
// in 1..kReentrantMarkerMax), a span a name, and a sequence number >= `min_seq`. Cheap: a few
// compares, no payload read, inline; the message is built in a cold function (ordinary_frame_why).
[[gnu::cold]] inline bool ordinary_frame_why(const RecordHeader& h, uint64_t avail,
                                                            uint64_t min_seq,
                                                            const RecordWhere& where,
                                                            std::string& why);
[[gnu::always_inline]] inline bool check_ordinary_frame(const RecordHeader& h, uint64_t avail,
                                                        uint64_t min_seq, const RecordWhere& where,
                                                        std::string& why) {
  // The conditions ordinary_frame_why() names, all at once.
  const bool packed = (h.flags & kRecordPackedAttrs) != 0;
  const uint16_t marker = h.flags & kRecordMarkers;
  const bool bad =
      h.slots == 0 || h.slots > kMaxRecordSlots || h.slots > avail || h.name_len > kNameRawMax ||
      h.attrs_len > (packed ? kAttrsPackedMax : kAttrsRawMax) || (packed && h.attrs_len == 0) ||
      h.slots != record_slots(uint32_t{h.name_len} + h.attrs_len) ||
      (h.flags & ~kRecordFlagsKnown) != 0 || (h.flags & kRecordCompact) != 0 ||
      (marker & (marker - 1)) != 0 ||
      (marker != 0 && (h.name_len != 0 || h.attrs_len != 0 || (h.flags & kRecordTsc) != 0)) ||
      (marker == 0 && h.name_len == 0) ||
      ((marker & kRecordReentrant) != 0 && (h.dur_ns == 0 || h.dur_ns > kReentrantMarkerMax)) ||
      h.seq < min_seq;
  if (__builtin_expect(!bad, 1)) return true;
  return ordinary_frame_why(h, avail, min_seq, where, why);
}

inline bool ordinary_frame_why(const RecordHeader& h, uint64_t avail, uint64_t min_seq,
                               const RecordWhere& where, std::string& why) {
  if (h.slots == 0 || h.slots > kMaxRecordSlots || h.slots > avail) {
    why = where.str() + " claims " + std::to_string(h.slots) + " slots (" + std::to_string(avail) +
          " published)";
    return false;
  }
  const bool packed = (h.flags & kRecordPackedAttrs) != 0;
  if (h.name_len > kNameRawMax || h.attrs_len > (packed ? kAttrsPackedMax : kAttrsRawMax) ||
      (packed && h.attrs_len == 0) ||
      h.slots != record_slots(uint32_t{h.name_len} + h.attrs_len)) {
    why = where.str() + " has inconsistent lengths (name " + std::to_string(h.name_len) + ", attrs " +
          std::to_string(h.attrs_len) + ", slots " + std::to_string(h.slots) + ")";
    return false;
  }
  const uint16_t marker = h.flags & kRecordMarkers;
  if ((h.flags & ~kRecordFlagsKnown) != 0 || (h.flags & kRecordCompact) != 0 ||
      (marker & (marker - 1)) != 0 ||
      (marker != 0 && (h.name_len != 0 || h.attrs_len != 0 || (h.flags & kRecordTsc) != 0)) ||
      (marker == 0 && h.name_len == 0) ||
      ((marker & kRecordReentrant) != 0 && (h.dur_ns == 0 || h.dur_ns > kReentrantMarkerMax))) {
    why = where.str() + " has bad flags " + std::to_string(h.flags);
    return false;
  }
  if (h.seq < min_seq) {
    why = where.str() + " has sequence " + std::to_string(h.seq) + ", expected at least " +
          std::to_string(min_seq);
    return false;
  }
  return true;
}

// Copies the payload of the ordinary record whose header is `out.header` (framing checked): the
// kInlinePayloadBytes of the header, then the record's following slots whole from `rest`
// (contiguous: `rest` holds (slots - 1) * kSlotBytes bytes). Whole slots, fixed-size copies:
// the payload's length decides nothing but how many (RecordCopy has room for all of them).
inline void copy_ordinary_payload(RecordCopy& out, const std::byte* rest) noexcept {
  const RecordHeader& h = out.header;
  std::memcpy(out.payload, h.payload, kInlinePayloadBytes);
  for (uint32_t s = 1; s < h.slots; ++s)
    std::memcpy(out.payload + kInlinePayloadBytes + (s - 1) * kSlotBytes,
                rest + (s - 1) * kSlotBytes, kSlotBytes);
}

// Whether name[0, len) holds a NUL byte (len <= kNameRawMax). With SSE2, 16 bytes a compare,
// reading len rounded up to 16 (a RecordCopy's payload has that room; the bytes past len are
// ignored); else memchr, a libc call that cost ~16 instructions per record.
inline bool name_has_nul(const char* name, uint32_t len) noexcept {
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (uint32_t i = 0; i < len; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(name + i));
    unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero)));
    if (len - i < 16) m &= (1u << (len - i)) - 1;
    if (m != 0) return true;
  }
  return false;
#else
  return std::memchr(name, 0, len) != nullptr;
#endif
}
static_assert(sizeof(RecordCopy::payload) >= (kNameRawMax + 15) / 16 * 16);

// What the attribute decoders below may write after a record's name before they cut the text at
// kAttrsRawMax: they write a whole token while the text is shorter than that, and a token is at
// most a space, its key (copied 16 bytes at a time, at least 16: up to kAttrsPackedMax - 2
// bytes, rounded up to 16), `=`, `-` and write_decimal's 20 bytes. RecordCopy's payload has room
// for a name and this.
inline constexpr uint32_t kAttrsWriteRoom =
    (kAttrsRawMax - 1) + 1 + (kAttrsPackedMax - kPackedTokenFixed + 15) / 16 * 16 + 2 + 20;
// unpack_attrs_fast writes 16 bytes of a key of any length: the rounded-up key covers it.
static_assert((kAttrsPackedMax - kPackedTokenFixed + 15) / 16 * 16 >= 16);
static_assert(kNameRawMax + kAttrsWriteRoom <= RecordCopy::kPayloadBytes);

// unpack_attrs (packed_attrs.h) for the drainer and the readers: the same text for the same
// list, cut at kAttrsRawMax, the same -1 for a malformed list, every token checked by the same
// next_packed_token (packed_attrs.h). Faster: keys
// copied 16 bytes at a time, values by write_decimal (src/decimal.h) instead of
// std::to_chars, no copy per piece; formatting stops once the text reaches the cut. in_len must
// be at most kAttrsPackedMax (a checked frame's), `in` readable for in_len + 16 bytes, `out`
// writable for kAttrsWriteRoom. Returns the length (<= kAttrsRawMax) or -1.
inline int32_t unpack_attrs_fast(const char* in, uint32_t in_len, char* out) noexcept {
  char* p = out;
  char* const cut = out + kAttrsRawMax;
  uint32_t i = 0;
  bool first = true;
  while (i < in_len) {
    PackedToken t;
    if (!next_packed_token(in, in_len, &i, t)) return -1;  // unpack_attrs' own check
    if (p >= cut) continue;  // past the cut: only checked
    if (!first) *p++ = ' ';
    first = false;
    // The first 16 bytes whatever the key's length (keys are mostly shorter: no loop turn).
    std::memcpy(p, t.key, 16);
    for (uint32_t k = 16; k < t.key_len; k += 16) std::memcpy(p + k, t.key + k, 16);
    p += t.key_len;
    *p++ = '=';
    if (t.negative) *p++ = '-';
    p = write_decimal(p, t.magnitude);
  }
  const auto len = static_cast<uint32_t>(p - out);
  return static_cast<int32_t>(len < kAttrsRawMax ? len : kAttrsRawMax);
}

// finish_ordinary's part for packed attributes (kRecordPackedAttrs): out of line, as only
// records with integer attributes take it.
[[gnu::noinline]] inline bool unpack_ordinary_attrs(RecordCopy& out, const RecordWhere& where,
                                                    std::string& why) {
  RecordHeader& h = out.header;
  // The text is written where the packed bytes are: they are copied out first, 16 bytes at a
  // time (the payload has room for the reads past them).
  char in[kAttrsPackedMax + 16];
  for (uint32_t k = 0; k < h.attrs_len; k += 16)
    std::memcpy(in + k, out.payload + h.name_len + k, 16);
  const int32_t n = unpack_attrs_fast(in, h.attrs_len, out.payload + h.name_len);
  if (n < 0) {
    why = where.str() + " has malformed packed attributes";
    return false;
  }
  h.attrs_len = static_cast<uint16_t>(n);
  h.flags = static_cast<uint16_t>(h.flags & ~kRecordPackedAttrs);
  return true;
}

[[gnu::cold]] inline bool name_nul_why(const RecordWhere& where, std::string& why) {
  why = where.str() + " has a NUL byte inside its name";
  return false;
}

// Completes an ordinary record whose payload is in `out` (framing checked): a NUL byte inside
// the name is corruption (the producer measures names with strnlen; attributes may hold one,
// which the encoder ends them at), and packed attributes (kRecordPackedAttrs) become their text,
// cut at kAttrsRawMax as the producer would have cut it; flags lose kRecordPackedAttrs.
// Inline: the common record (no packed attributes) costs its NUL check and one flag test, no
// call (the call's register saves were ~18 instructions per record).
[[gnu::always_inline]] inline bool finish_ordinary(RecordCopy& out, const RecordWhere& where,
                                                   std::string& why) {
  const RecordHeader& h = out.header;
  if (__builtin_expect(name_has_nul(out.payload, h.name_len), 0)) return name_nul_why(where, why);
  if ((h.flags & kRecordPackedAttrs) != 0) return unpack_ordinary_attrs(out, where, why);
  return true;
}

// The framing of a compact record `c` that must carry sequence number `seq`: one slot, flags
// kRecordCompact with at most kRecordTsc besides (`allow_tsc`), an attribute count in range (0
// with kCompactAttrsText), and seq_lo the low 32 bits of `seq`.
[[gnu::cold]] inline bool compact_frame_why(const CompactRecord& c, uint64_t seq,
                                                           bool allow_tsc,
                                                           const RecordWhere& where,
                                                           std::string& why);
[[gnu::always_inline]] inline bool check_compact_frame(const CompactRecord& c, uint64_t seq,
                                                       bool allow_tsc, const RecordWhere& where,
                                                       std::string& why) {
  // The conditions compact_frame_why() names, all at once.
  const uint32_t count = c.attrs & 0x7u;
  const uint16_t allowed = allow_tsc ? (kRecordCompact | kRecordTsc) : kRecordCompact;
  const bool bad = c.slots != 1 || (c.flags & ~allowed) != 0 || (c.flags & kRecordCompact) == 0 ||
                   count > kCompactAttrs || ((c.attrs & kCompactAttrsText) != 0 && count != 0) ||
                   c.seq_lo != static_cast<uint32_t>(seq);
  if (__builtin_expect(!bad, 1)) return true;
  return compact_frame_why(c, seq, allow_tsc, where, why);
}

inline bool compact_frame_why(const CompactRecord& c, uint64_t seq, bool allow_tsc,
                              const RecordWhere& where, std::string& why) {
  const uint32_t count = c.attrs & 0x7u;
  const bool text = (c.attrs & kCompactAttrsText) != 0;
  if (c.slots != 1) {
    why = where.str() + " claims " + std::to_string(c.slots) + " slots";
    return false;
  }
  const uint16_t allowed = allow_tsc ? (kRecordCompact | kRecordTsc) : kRecordCompact;
  if ((c.flags & ~allowed) != 0 || (c.flags & kRecordCompact) == 0 || count > kCompactAttrs ||
      (text && count != 0)) {
    why = where.str() + " has bad flags " + std::to_string(c.flags) + " or attributes byte " +
          std::to_string(c.attrs);
    return false;
  }
  if (c.seq_lo != static_cast<uint32_t>(seq)) {
    why = where.str() + " has sequence low bits " + std::to_string(c.seq_lo) + ", expected " +
          std::to_string(static_cast<uint32_t>(seq)) + " (sequence " + std::to_string(seq) + ")";
    return false;
  }
  return true;
}

// The string ids a compact record names (framing checked): its name, then its attribute text
// or its `count` keys. Returns how many (1..1 + kCompactAttrs) are in `ids`.
inline uint32_t compact_string_ids(const CompactRecord& c, uint16_t (&ids)[1 + kCompactAttrs]) {
  ids[0] = c.name;
  if ((c.attrs & kCompactAttrsText) != 0) {
    ids[1] = c.keys[0];
    return 2;
  }
  const uint32_t count = c.attrs & 0x7u;
  for (uint32_t i = 0; i < count; ++i) ids[1 + i] = c.keys[i];
  return 1 + count;
}

namespace record_decode_detail {

// Appends `key=value` for one compact attribute at `p` and returns the end: the text pack_token
// and unpack_attrs give for the same attribute (decimal, `-` and the magnitude when negative).
// Copies kStringMaxBytes of the key whatever its length (`key` must be readable that far; `p`
// needs kStringMaxBytes + 22 bytes of room).
inline char* put_attr(char* p, std::string_view key, uint32_t value, bool is_signed) noexcept {
  std::memcpy(p, key.data(), kStringMaxBytes);
  p += key.size();
  *p++ = '=';
  uint32_t magnitude = value;
  if (is_signed && static_cast<int32_t>(value) < 0) {
    *p++ = '-';
    magnitude = 0u - value;  // 2^31 for INT32_MIN: exact in uint32_t
  }
  return write_decimal(p, magnitude);
}

}  // namespace record_decode_detail

// Decodes the compact record `c` (framing checked) with sequence number `seq` into the ordinary
// record of the same span: flags kRecordTsc of `c` only, the name resolved, the attribute text
// resolved or formatted as unpack_attrs formats packed integers (cut at kAttrsRawMax alike).
// `resolve(id, std::string_view& bytes, std::string& why) -> bool` gives a string's raw bytes
// (1..kStringMaxBytes), which stay readable for kStringMaxBytes from data() (the string table
// reader's and the binary reader's copies keep kStringMaxBytes per id: strings are copied whole).
// Returns false when an id does not resolve (why says which); out.header
// then holds seq, ts_ns, dur_ns, depth (what a caller reports of the dropped record).
template <class Resolve>
bool decode_compact(const CompactRecord& c, uint64_t seq, Resolve&& resolve, RecordCopy& out,
                    const RecordWhere& where, std::string& why) {
  RecordHeader& h = out.header;
  const uint32_t count = c.attrs & 0x7u;
  const bool text = (c.attrs & kCompactAttrsText) != 0;
  h.seq = seq;
  h.ts_ns = c.ts_ns;
  h.dur_ns = c.dur_ns;
  h.inv = c.inv;
  h.hid = c.hid;
  h.depth = c.depth;
  h.name_len = 0;
  h.attrs_len = 0;
  h.slots = 1;
  h.flags = static_cast<uint16_t>(c.flags & kRecordTsc);
  std::string_view name;
  if (!resolve(uint32_t{c.name}, name, why)) {
    why = where.str() + ": name: " + why;
    return false;
  }
  std::memcpy(out.payload, name.data(), kStringMaxBytes);  // whole: the resolver's promise
  h.name_len = static_cast<uint16_t>(name.size());  // 1..kStringMaxBytes <= kNameRawMax
  char* const attrs = out.payload + name.size();
  if (text) {
    std::string_view t;
    if (!resolve(uint32_t{c.keys[0]}, t, why)) {
      why = where.str() + ": attribute text: " + why;
      return false;
    }
    std::memcpy(attrs, t.data(), kStringMaxBytes);
    h.attrs_len = static_cast<uint16_t>(t.size());
    return true;
  }
  if (count == 0) return true;
  // Formatted whole in place (at most kCompactAttrs keys of kStringMaxBytes, `=`, 11 characters
  // of value and a space each, put_attr's copies writing up to 22 bytes past a key's end), then
  // cut by the length.
  static_assert(kStringMaxBytes + kCompactAttrs * (1 + kStringMaxBytes + 22) <=
                RecordCopy::kPayloadBytes);
  char* const buf = attrs;
  char* p = buf;
  for (uint32_t i = 0; i < count; ++i) {
    std::string_view key;
    if (!resolve(uint32_t{c.keys[i]}, key, why)) {
      why = where.str() + ": key " + std::to_string(i) + ": " + why;
      return false;
    }
    if (i != 0) *p++ = ' ';
    p = record_decode_detail::put_attr(p, key, c.values[i], (c.attrs >> (4 + i) & 1u) != 0);
  }
  const auto n = static_cast<uint32_t>(p - buf);
  h.attrs_len = static_cast<uint16_t>(n < kAttrsRawMax ? n : kAttrsRawMax);
  return true;
}

// Decodes the `records` records of a run (binary event 8, format/binary_format.h): `slots`
// holds them as the ring held them, framing checked (the reader's check, or the drainer's own
// copy), the first with sequence number first_seq. Calls on_span(rec) for each record that
// decodes and on_corrupt(seq, why) for one that does not (a NUL in its name, malformed packed
// attributes, a string id `resolve` does not know). The one decoding of runs: the binary reader
// and the drainer's tee (drain/tee_sink.h) both use it.
template <class Resolve, class OnSpan, class OnCorrupt>
void decode_run(const char* slots, uint32_t records, uint64_t first_seq, Resolve&& resolve,
                RecordCopy& rec, OnSpan&& on_span, OnCorrupt&& on_corrupt) {
  uint32_t at = 0;
  std::string why;
  for (uint32_t i = 0; i < records; ++i) {
    const uint64_t seq = first_seq + i;
    std::memcpy(&rec.header, slots + size_t{at} * kSlotBytes, sizeof rec.header);
    const RecordWhere where{"run record ", i, " at slot ", at};
    bool ok;
    if ((rec.header.flags & kRecordCompact) != 0) {
      CompactRecord c;
      std::memcpy(&c, &rec.header, sizeof c);
      at += 1;
      ok = decode_compact(c, seq, resolve, rec, where, why);
    } else {
      at += rec.header.slots;
      copy_ordinary_payload(rec, reinterpret_cast<const std::byte*>(slots) +
                                     (size_t{at} - rec.header.slots + 1) * kSlotBytes);
      ok = finish_ordinary(rec, where, why);
    }
    if (ok) on_span(static_cast<const RecordCopy&>(rec));
    else on_corrupt(seq, why);
  }
}

}  // namespace spanring
