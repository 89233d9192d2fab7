#include "format/strace_format.h"

#include "src/decimal.h"
#include "src/record_decode.h"

#include <spanring/encode.h>

#include <cstring>
#include <string_view>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace spanring {
namespace {

struct Out {
  char* p;
  void str(std::string_view s) noexcept {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  // Lowercase digits, no leading zeros, as the spec's fields are written: std::to_chars'
  // output, in a fifth of its instructions (src/decimal.h says why and how).
  void dec(uint64_t v) noexcept { p = write_decimal(p, v); }
  void hex(uint64_t v) noexcept { p = write_hex(p, v); }
  void prefix(uint64_t mono, uint32_t tid, std::string_view what) noexcept {
    str("[mono_ns=");
    dec(mono);
    str("][T0x");
    hex(tid);
    str("][TIMING] ");
    str(what);
  }
};

}  // namespace

namespace {

#if defined(__SSE2__)
// copy_plain's last vector: kPast from 16 - (len - i) has 0 in the field's lanes (the first
// len - i) and 0xff past them.
alignas(16) constexpr unsigned char kPast[32] = {
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
#endif

#if defined(__x86_64__)
// Whether attribute text of more than kWideFrom bytes goes to copy_attrs_avx2 (below): set at
// start-up where the CPU has AVX2. Zero-initialised, so a line formatted before the dynamic
// initialisation (from another translation unit's) takes the 16-byte path: the same bytes.
// Written only then and by set_wide_attrs_copy (tests, before lines are formatted).
bool g_wide_attrs = [] {
  __builtin_cpu_init();  // may run before libgcc's own constructor has
  return __builtin_cpu_supports("avx2") != 0;
}();
constexpr size_t kWideFrom = 32;  // shorter fields: one or two 16-byte vectors, inline
#define DUP8(c) c, c, c, c, c, c, c, c
#define DUP32(c) DUP8(c), DUP8(c), DUP8(c), DUP8(c)

// The 32-byte constant at `c`, loaded from memory: its address is hidden from the optimizer (an
// empty asm), so it is one load, where GCC would build each byte-splat constant from an
// immediate (a move, a vmovq and a broadcast: ~15 instructions a call for the five).
[[gnu::target("avx2")]] [[gnu::always_inline]] inline __m256i opaque_load(const char* c) noexcept {
  asm("" : "+r"(c));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(c));
}

// Byte i 0xff: byte i of v is copied as is in attribute text (copy_plain's check, 32 lanes).
[[gnu::target("avx2")]] [[gnu::always_inline]] inline __m256i copied32(
    __m256i v, __m256i bias, __m256i top, __m256i pct, __m256i lb, __m256i rb) noexcept {
  const __m256i in_range = _mm256_cmpgt_epi8(top, _mm256_add_epi8(v, bias));
  const __m256i special = _mm256_or_si256(
      _mm256_cmpeq_epi8(v, pct),
      _mm256_or_si256(_mm256_cmpeq_epi8(v, lb), _mm256_cmpeq_epi8(v, rb)));
  return _mm256_andnot_si256(special, in_range);
}

// copy_plain<false> (below) for a field of more than kWideFrom bytes, with AVX2: 32 bytes a
// vector, the last one ending at the field's end (overlapping the one before it: those bytes
// are checked and written twice, and each store holds the bytes its own load checked, so a line
// from the ring's slots holds only checked bytes even if they change between the two loads), so
// it reads and writes in[0, len) and out[0, len) only. Out of line, its own instruction set: in
// the demo's attribute text (~80 bytes) ~35 instructions fewer than five 16-byte SSE2 vectors
// with their register copies (callgrind).
[[gnu::target("avx2")]] [[gnu::noinline]] bool copy_attrs_avx2(const char* in, size_t len,
                                                               char* out) noexcept {
  // As copy_plain's SSE2 check for attributes: v + 0x60 maps 0x20 to -128, so one signed
  // compare with the image of 0x7f (0xdf) finds the copied range 0x20..0x7e; then % [ ].
  alignas(32) static constexpr char kConst[5][32] = {
      {DUP32(static_cast<char>(0x60))}, {DUP32(static_cast<char>(0xdf))}, {DUP32('%')},
      {DUP32('[')}, {DUP32(']')}};
  const char* const k = kConst[0];
  const __m256i bias = opaque_load(k);
  const __m256i top = opaque_load(k + 32);
  const __m256i pct = opaque_load(k + 64);
  const __m256i lb = opaque_load(k + 96);
  const __m256i rb = opaque_load(k + 128);
  __m256i all = _mm256_cmpeq_epi8(bias, bias);  // every lane 0xff
  // The first vector, then the loop (no turn for 33..64 bytes), then the one ending at len.
  const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  all = _mm256_and_si256(all, copied32(first, bias, top, pct, lb, rb));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), first);
  for (size_t i = 32; i + 32 < len; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    all = _mm256_and_si256(all, copied32(v, bias, top, pct, lb, rb));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
  }
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + len - 32));
  all = _mm256_and_si256(all, copied32(v, bias, top, pct, lb, rb));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + len - 32), v);
  return _mm256_testc_si256(all, _mm256_cmpeq_epi8(all, all)) != 0;  // every lane 0xff
}
#undef DUP32
#undef DUP8
#endif

// Copies in[0, len) to `out` and returns true when every byte is one the [STRACE] encoding
// copies as is (shared/strace-format.md: printable ASCII 0x20-0x7e but `%` `[` `]`, and in names
// also not space or `=`), which is what most names and attributes are; else returns false with
// `out` partly written, and the caller encodes the field from its start (encode.h), which
// also handles NUL, escapes and cuts. Works on whole 16-byte vectors (SSE2, NEON): reads and
// writes len rounded up to 16 bytes, so `in` and `out` must have that much room (a RecordCopy's
// payload and a line do: the static_assert below); the last vector's bytes past len are read
// but ignored. Inline, without the call, the length dispatch and the class table of
// encode_name/encode_attrs, whose own check cost ~80 instructions per field (callgrind).
// With NEON (aarch64) the same 16-byte vectors; with neither: false, and the encoder's own loop
// does the work.
template <bool kName>
inline bool copy_plain(const char* in, size_t len, char* out) noexcept {
#if defined(__SSE2__)
  // v + bias maps the lowest byte copied (0x20, names 0x21) to -128 as a signed byte, so that
  // one signed compare with the image of 0x7f finds the copied range 0x20/0x21..0x7e.
  const __m128i bias = _mm_set1_epi8(static_cast<char>(kName ? 0x5f : 0x60));
  const __m128i top = _mm_set1_epi8(static_cast<char>(kName ? 0xde : 0xdf));
  const __m128i pct = _mm_set1_epi8('%');
  const __m128i lb = _mm_set1_epi8('[');
  const __m128i rb = _mm_set1_epi8(']');
  const __m128i eq = _mm_set1_epi8('=');
  auto copied = [&](__m128i v) {  // byte i 0xff: byte i is copied as is
    const __m128i in_range = _mm_cmplt_epi8(_mm_add_epi8(v, bias), top);
    __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, pct),
                                   _mm_or_si128(_mm_cmpeq_epi8(v, lb), _mm_cmpeq_epi8(v, rb)));
    if (kName) special = _mm_or_si128(special, _mm_cmpeq_epi8(v, eq));
    return _mm_andnot_si128(special, in_range);
  };
  if (len == 0) return true;
#if defined(__x86_64__)
  if (!kName && len > kWideFrom && g_wide_attrs) return copy_attrs_avx2(in, len, out);
#endif
  // Every vector is stored and its verdict and-ed into `all`, one test at the end (not a
  // movemask, compare and branch per vector): a refused field leaves `out` partly written,
  // which the caller overwrites.
  __m128i all = _mm_set1_epi8(-1);
  size_t i = 0;
  for (; i + 16 < len; i += 16) {  // every vector but the last
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    all = _mm_and_si128(all, copied(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), v);
  }
  // The last vector holds 1..16 of the field's bytes; the lanes past them count as copied
  // (their bytes are read but not the field's): kPast.
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
  const __m128i past = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kPast + 16 - (len - i)));
  all = _mm_and_si128(all, _mm_or_si128(copied(v), past));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), v);
  return _mm_movemask_epi8(all) == 0xffff;
#elif defined(__ARM_NEON) && defined(__aarch64__)
  // The same check with NEON (aarch64): a lane is 0xff when its byte is copied as is (in
  // 0x20/0x21..0x7e and none of the escaped bytes); a vector is taken when its smallest lane is.
  const uint8x16_t lo = vdupq_n_u8(kName ? 0x21 : 0x20);
  const uint8x16_t hi = vdupq_n_u8(0x7e);
  const uint8x16_t pct = vdupq_n_u8('%');
  const uint8x16_t lb = vdupq_n_u8('[');
  const uint8x16_t rb = vdupq_n_u8(']');
  const uint8x16_t eq = vdupq_n_u8('=');
  auto copied = [&](uint8x16_t v) {
    const uint8x16_t in_range = vandq_u8(vcgeq_u8(v, lo), vcleq_u8(v, hi));
    uint8x16_t special = vorrq_u8(vceqq_u8(v, pct), vorrq_u8(vceqq_u8(v, lb), vceqq_u8(v, rb)));
    if (kName) special = vorrq_u8(special, vceqq_u8(v, eq));
    return vbicq_u8(in_range, special);
  };
  const auto* src = reinterpret_cast<const uint8_t*>(in);
  auto* dst = reinterpret_cast<uint8_t*>(out);
  size_t i = 0;
  for (; i + 16 <= len; i += 16) {
    const uint8x16_t v = vld1q_u8(src + i);
    if (vminvq_u8(copied(v)) != 0xff) return false;
    vst1q_u8(dst + i, v);
  }
  if (i < len) {
    static constexpr uint8_t kLane[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const uint8x16_t v = vld1q_u8(src + i);
    // Lanes past the field's end count as copied (their bytes are read but not the field's).
    const uint8x16_t past = vcgeq_u8(vld1q_u8(kLane), vdupq_n_u8(static_cast<uint8_t>(len - i)));
    if (vminvq_u8(vorrq_u8(copied(v), past)) != 0xff) return false;
    vst1q_u8(dst + i, v);
  }
  return true;
#else
  (void)in;
  (void)len;
  (void)out;
  return false;
#endif
}

// copy_plain is called for a name of at most kNameCap bytes and attributes of at most kAttrsCap:
// both caps are multiples of 16, so the rounded-up bytes it reads stay within a RecordCopy's
// payload (name, then attributes) and the bytes it writes within the field's cap in the line.
static_assert(sizeof(RecordCopy::payload) >= kNameCap + kAttrsCap &&
              kNameCap % 16 == 0 && kAttrsCap % 16 == 0);

// A span line's two text fields.
enum class Field { kName, kAttrs };

// A record still in the ring's slots (format_span_plain): its header's copy, its payload in
// place, and whether every field so far was copied as it is.
struct PlainSpan {
  uint32_t pid;
  uint32_t tid;
  const RecordHeader& h;
  const char* payload;
  bool* plain;
};

// Writes field `f` of the drained record `r` at `p` and returns the end: its raw bytes, copied
// as they are when they need no escaping (copy_plain) and encoded otherwise (encode_name /
// encode_attrs, which also cut at the field's cap).
template <Field f>
[[gnu::always_inline]] inline char* put_field(char* p, const RecordCopy& r) noexcept {
  constexpr bool kName = f == Field::kName;
  const char* const raw = kName ? r.name() : r.attrs();
  const size_t n = kName ? r.header.name_len : r.header.attrs_len;
  if (n <= (kName ? kNameCap : kAttrsCap) && copy_plain<kName>(raw, n, p)) return p + n;
  return p + (kName ? encode_name(raw, n, p) : encode_attrs(raw, n, p));
}

// Field `f` of a record in the ring's slots: copied as it is when copy_plain takes it (which
// also refuses a NUL: it is outside the copied range), else nothing written and s.plain cleared.
// Caps as put_field's above: a field longer than its cap needs the encoder's cut.
// Packed attributes (kRecordPackedAttrs) are copied out of the slots first (each byte read once,
// 16 at a time: peek_plain's bounds), unpacked by unpack_attrs_fast straight into the line, and
// the text checked in place: its keys are raw bytes, and a text cut at kAttrsRawMax needs the
// encoder's cut mark. A malformed list is left to read(), which refuses it.
template <Field f>
[[gnu::always_inline]] inline char* put_field(char* p, const PlainSpan& s) noexcept {
  constexpr bool kName = f == Field::kName;
  const char* const raw = kName ? s.payload : s.payload + s.h.name_len;
  const size_t n = kName ? s.h.name_len : s.h.attrs_len;
  if (!kName && (s.h.flags & kRecordPackedAttrs) != 0) {
    char in[kAttrsPackedMax + 16];  // unpack_attrs_fast reads up to 16 bytes past the list
#if defined(__SSE2__)
    // A loop of vector moves: GCC makes a loop of 16-byte copies one call of memcpy (~20
    // instructions with the call and its set-up, for the ~60 bytes of a packed list, where the
    // loop is ~10); the empty asm (no instruction) keeps it a loop.
    for (uint32_t k = 0; k < n; k += 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(raw + k));
      asm("" : "+x"(v));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(in + k), v);
    }
#else
    for (uint32_t k = 0; k < n; k += 16) std::memcpy(in + k, raw + k, 16);
#endif
    const int32_t len = unpack_attrs_fast(in, static_cast<uint32_t>(n), p);
    if (len >= 0 && static_cast<uint32_t>(len) <= kAttrsCap &&
        copy_plain<false>(p, static_cast<size_t>(len), p))
      return p + len;
  } else if (n <= (kName ? kNameCap : kAttrsCap) && copy_plain<kName>(raw, n, p)) {
    return p + n;
  }
  *s.plain = false;
  return p;
}

// A compact record (format_span_compact): its numbers in a header, the record, and its
// strings resolved (the name, then its attribute text or its keys, compact_string_ids' order).
struct CompactSpan {
  uint32_t pid;
  uint32_t tid;
  const RecordHeader& h;
  const CompactRecord& c;
  const std::string_view* strings;
  bool* plain;
};

// Field `f` of a compact record: the name or the attribute text copied from the string
// source's checked copy (kStringMaxBytes readable per string: copy_plain's rounded-up reads
// stay inside), or the integer attributes formatted into the line as decode_compact formats
// them (put_attr) and checked in place; s.plain cleared, nothing written, when copy_plain does
// not take the field or the text is longer than kAttrsCap (decode_compact's cut, the encoder's).
template <Field f>
[[gnu::always_inline]] inline char* put_field(char* p, const CompactSpan& s) noexcept {
  static_assert(kStringMaxBytes <= kNameCap && kStringMaxBytes <= kAttrsCap &&
                kStringMaxBytes % 16 == 0);
  if (f == Field::kName) {
    if (copy_plain<true>(s.strings[0].data(), s.strings[0].size(), p))
      return p + s.strings[0].size();
  } else if ((s.c.attrs & kCompactAttrsText) != 0) {
    if (copy_plain<false>(s.strings[1].data(), s.strings[1].size(), p))
      return p + s.strings[1].size();
  } else {
    const uint32_t count = s.c.attrs & 0x7u;
    char* q = p;
    for (uint32_t i = 0; i < count; ++i) {
      if (i != 0) *q++ = ' ';
      q = record_decode_detail::put_attr(q, s.strings[1 + i], s.c.values[i],
                                         (s.c.attrs >> (4 + i) & 1u) != 0);
    }
    const auto n = static_cast<size_t>(q - p);
    if (n <= kAttrsCap && copy_plain<false>(p, n, p)) return p + n;
  }
  *s.plain = false;
  return p;
}

// Field `f` of span `e`: from its record when it has one, else (the text reader's events) the
// spelling as it stood on its line.
template <Field f>
[[gnu::always_inline]] inline char* put_field(char* p, const SpanEvent& e) noexcept {
  if (e.record != nullptr) return put_field<f>(p, *e.record);
  const std::string_view spelled = f == Field::kName ? e.name : e.attrs;
  std::memcpy(p, spelled.data(), spelled.size());
  return p + spelled.size();
}

// The line after the owner's part (the invocation's value onwards), every number converted:
// the stateless format_span's, which the tests hold the cached one (below) against.
size_t span_rest(Out o, const char* out, const SpanEvent& e) noexcept {
  o.dec(e.inv);
  o.str(" hid=");
  o.hex(e.hid);
  o.str(" depth=");
  o.dec(e.depth);
  o.str(" name=");
  o.p = put_field<Field::kName>(o.p, e);
  o.str(" ts=");
  o.dec(e.ts_ns);
  o.str(" dur=");
  o.dec(e.dur_ns);
  // The separating space is written even with no attributes: the line then ends `dur=<n> `.
  o.str(" ");
  o.p = put_field<Field::kAttrs>(o.p, e);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

}  // namespace

size_t format_span(char* out, const SpanEvent& e) noexcept {
  Out o{out};
  o.prefix(e.ts_ns + e.dur_ns, e.tid, "emit_host_span: [STRACE] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" inv=");
  return span_rest(o, out, e);
}

void SpanLineOwner::set_owner(uint32_t pid, uint32_t tid) noexcept {
  Out o{bytes_};
  o.str("][T0x");
  o.hex(tid);
  o.str("][TIMING] emit_host_span: [STRACE] v=1 pid=");
  o.dec(pid);
  o.str(" tid=");
  o.dec(tid);
  o.str(" inv=");
  len_ = static_cast<size_t>(o.p - bytes_);
  pid_ = pid;
  tid_ = tid;
  set_ = true;
}

void SpanLineOwner::set_inv_hid(uint64_t inv, uint64_t hid) noexcept {
  // The hid's text is kept on its own: ~90 of the ~150 instructions of a refill were the hid's
  // 16 hex digits and the copies around them (callgrind, the demo, whose inv changes every ~8
  // lines and whose hid almost never does).
  if (__builtin_expect(!hid_text_set_ || hid != hid_text_of_, 0)) {
    Out o{hid_text_};
    o.str(" hid=");
    o.hex(hid);
    o.str(" depth=");
    hid_text_len_ = static_cast<uint32_t>(o.p - hid_text_);
    hid_text_of_ = hid;
    hid_text_set_ = true;
  }
  char* const p = write_decimal(inv_hid_, inv);  // writes within inv_hid_'s first 20 bytes
  std::memcpy(p, hid_text_, kHidCopyBytes);     // hid_text_len_ of them are the text
  inv_hid_len_ = static_cast<size_t>(p - inv_hid_) + hid_text_len_;
  inv_ = inv;
  hid_ = hid;
  inv_hid_set_ = true;
}

namespace {

// The line of span `s` (a SpanEvent, or a drained record with its owner: RecordSpan) with the
// owner's part, the (inv, hid) text and the times' leading digits from `owner`. One function,
// everything but the rare refills inline: the calls of the pieces (their register saves and
// restores) were ~30 instructions per line.
struct RecordSpan {
  uint32_t pid;
  uint32_t tid;
  const RecordCopy& r;
};
inline const RecordHeader& numbers(const RecordSpan& s) noexcept { return s.r.header; }
inline const SpanEvent& numbers(const SpanEvent& e) noexcept { return e; }
inline const RecordHeader& numbers(const PlainSpan& s) noexcept { return s.h; }
inline const RecordCopy& fields(const RecordSpan& s) noexcept { return s.r; }
inline const SpanEvent& fields(const SpanEvent& e) noexcept { return e; }
inline const PlainSpan& fields(const PlainSpan& s) noexcept { return s; }
inline const RecordHeader& numbers(const CompactSpan& s) noexcept { return s.h; }
inline const CompactSpan& fields(const CompactSpan& s) noexcept { return s; }

template <class S>
[[gnu::always_inline]] inline size_t span_line(char* out, const S& s,
                                               SpanLineOwner& owner) noexcept {
  const auto& n = numbers(s);  // ts_ns, dur_ns, inv, hid, depth
  char* p = out;
  DecimalCache::SpanTimes times = owner.times.span(n.ts_ns, n.dur_ns);
  std::memcpy(p, "[mono_ns=", 9);
  p = times.end(p + 9);
  std::memcpy(p, owner.bytes(s.pid, s.tid), SpanLineOwner::kCopyBytes);  // the rest: overwritten
  p += owner.size();
  p = owner.inv_hid(p, n.inv, n.hid);
  p = write_decimal(p, n.depth);
  std::memcpy(p, " name=", 6);
  p = put_field<Field::kName>(p + 6, fields(s));
  std::memcpy(p, " ts=", 4);
  p = times.start(p + 4);
  std::memcpy(p, " dur=", 5);
  p = times.dur(p + 5);
  *p++ = ' ';  // written even with no attributes: the line then ends `dur=<n> `
  p = put_field<Field::kAttrs>(p, fields(s));
  *p++ = '\n';
  return static_cast<size_t>(p - out);
}

}  // namespace

size_t format_span(char* out, const SpanEvent& e, SpanLineOwner& owner) noexcept {
  return span_line(out, e, owner);
}

size_t format_span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec,
                   SpanLineOwner& owner) noexcept {
  return span_line(out, RecordSpan{pid, tid, rec}, owner);
}

size_t format_span_plain(char* out, uint32_t pid, uint32_t tid, const RecordHeader& h,
                         const char* payload, SpanLineOwner& owner) noexcept {
#if defined(__SSE2__) || (defined(__ARM_NEON) && defined(__aarch64__))
  bool plain = true;
  const size_t n = span_line(out, PlainSpan{pid, tid, h, payload, &plain}, owner);
  return plain ? n : 0;
#else
  // copy_plain copies nothing without SSE2 or NEON: every record takes the RecordCopy path.
  (void)out, (void)pid, (void)tid, (void)h, (void)payload, (void)owner;
  return 0;
#endif
}

size_t format_span_compact(char* out, uint32_t pid, uint32_t tid, const RecordHeader& h,
                           const CompactRecord& c, const std::string_view* strings,
                           SpanLineOwner& owner) noexcept {
#if defined(__SSE2__) || (defined(__ARM_NEON) && defined(__aarch64__))
  bool plain = true;
  const size_t n = span_line(out, CompactSpan{pid, tid, h, c, strings, &plain}, owner);
  return plain ? n : 0;
#else
  (void)out, (void)pid, (void)tid, (void)h, (void)c, (void)strings, (void)owner;
  return 0;
#endif
}

bool set_wide_attrs_copy(bool on) noexcept {
#if defined(__x86_64__)
  __builtin_cpu_init();
  g_wide_attrs = on && __builtin_cpu_supports("avx2") != 0;
  return g_wide_attrs;
#else
  (void)on;
  return false;
#endif
}

size_t format_anchor(char* out, const ProcessEvent& e) noexcept {
  Out o{out};
  o.prefix(e.mono_ns, e.tid, "clock_anchor: [CLOCK_ANCHOR] v=1 pid=");
  o.dec(e.pid);
  o.str(" mono_ns=");
  o.dec(e.mono_ns);
  o.str(" wall_ns=");
  o.dec(e.wall_ns);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

size_t format_drops(char* out, const DropsEvent& e) noexcept {
  Out o{out};
  o.str("[SPANRING_DROPS] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" dropped=");
  o.dec(e.dropped);
  o.str(" first_seq=");
  o.dec(e.first_seq);
  o.str(" last_seq=");
  o.dec(e.last_seq);
  o.str(" reason=");
  o.str(drop_reason_name(e.reason));
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

size_t encode_unfinished_name(char* out, std::string_view raw, bool cut) noexcept {
  // The ring kept only the name's first bytes. Encode them unit by unit under the cap; if they
  // did not all fit, or the name went on past them, mark the cut exactly as the [STRACE] spec
  // does: at the cap, drop the whole last unit, then `~`.
  size_t n = 0;
  size_t last_unit = 0;
  for (size_t i = 0; i < raw.size() && raw[i] != '\0'; ++i) {
    char unit[3];
    const size_t u = encode_name(&raw[i], 1, unit);
    if (n + u > kNameCap) {
      cut = true;
      break;
    }
    std::memcpy(out + n, unit, u);
    n += u;
    last_unit = u;
  }
  if (cut) {
    if (n == kNameCap) n -= last_unit;
    out[n++] = '~';
  }
  if (n > 0) return n;
  std::memcpy(out, "%3F", 3);  // no name was recorded: `?`, encoded
  return 3;
}

size_t format_unfinished(char* out, const UnfinishedEvent& e) noexcept {
  Out o{out};
  o.str("[SPANRING_UNFINISHED] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" inv=");
  o.dec(e.inv);
  o.str(" depth=");
  o.dec(e.depth);
  o.str(" name=");
  if (!e.spelled_name.empty()) o.str(e.spelled_name);
  else o.p += encode_unfinished_name(o.p, e.raw_name, e.name_cut);
  o.str(" ts=");
  o.dec(e.ts_ns);
  o.str(" reason=owner_died\n");
  return static_cast<size_t>(o.p - out);
}

size_t format_undescribed(char* out, const UndescribedEvent& e) noexcept {
  Out o{out};
  o.str("[SPANRING_UNFINISHED] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" undescribed=");
  o.dec(e.count);
  o.str(" reason=owner_died_deeper_than_");
  o.dec(kOpenSpanMax);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

bool is_device_span(const RecordCopy& rec) noexcept {
  return is_device_attrs(std::string_view(rec.attrs(), rec.header.attrs_len));
}

}  // namespace spanring
