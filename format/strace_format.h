// Formatting of drainer output lines in the [STRACE] text format (shared/strace-format.md) and
// of spanring's own report lines, which [STRACE] parsers ignore (they hold no `[STRACE]` or
// `[CLOCK_ANCHOR]` token).
//
// Each format_* function writes one complete line, LF included, at `out`, which must have room for
// kMaxLineBytes, and returns the bytes written. No allocation, no snprintf; pure, any thread.
#pragma once

#include "src/decimal.h"
#include "src/record_decode.h"
#include "format/event.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace spanring {

// The longest [STRACE] line: prefix and fixed tokens with 20-digit numbers, a 64-byte name and
// 192 bytes of attributes stay under 512 bytes (the spec keeps lines atomic for pipes).
inline constexpr size_t kMaxLineBytes = 512;

// One span record. Prefix `[mono_ns=E][T0x<P>]`: E = ts + dur (the span's end, the time the
// original logger would have written the line), P = the tid in lowercase hex (spanring has no
// pthread_self() of the producer; documented in docs/output.md). Name and attributes are
// encoded from `e.record` when it is set, else written as spelled (`e.name`, `e.attrs`).
size_t format_span(char* out, const SpanEvent& e) noexcept;

// The part of a span line that only its ring owner decides, between the end time and the
// invocation: `][T0x<tid>][TIMING] emit_host_span: [STRACE] v=1 pid=<pid> tid=<tid> inv=`,
// kept for the last (pid, tid) seen. The drainer writes a ring's records one after another, so
// this is formatted once per owner and batch instead of once per line (three numbers and four
// fixed strings, ~100 instructions of the ~500 per line, callgrind). Single thread, like a Sink.
//
// It also keeps what consecutive lines repeat beyond the owner: the leading digits of the end and
// start times (DecimalCache, src/decimal.h) and the text of the last (inv, hid) pair with the
// fixed text around it, `<inv> hid=<hid> depth=` (a thread's spans of one invocation share both:
// the hid's 16 hex digits were ~25 instructions per line). The bytes are those format_span
// writes without it, whatever the order of lines (test_text_sink).
class SpanLineOwner {
 public:
  // The fragment for (pid, tid): formatted when they differ from the last call's (out of line,
  // once per owner change; the compare is inline).
  const char* bytes(uint32_t pid, uint32_t tid) noexcept {
    if (__builtin_expect(!set_ || pid != pid_ || tid != tid_, 0)) set_owner(pid, tid);
    return bytes_;
  }
  size_t size() const noexcept { return len_; }
  // The longest fragment: fixed text (5 + 10 + 34 + 5 + 5) and three numbers of at most 8
  // (hex), 10 and 10 digits.
  static constexpr size_t kMaxBytes = 87;
  // Room kept after it, so that copying it is one fixed-size copy (a line has room for that:
  // it comes after at most 29 bytes, of kMaxLineBytes).
  static constexpr size_t kCopyBytes = 96;

  // Writes `<inv> hid=<hid> depth=` at `out` (room for kInvHidCopyBytes), from the kept text when
  // (inv, hid) are the last call's; returns the end.
  char* inv_hid(char* out, uint64_t inv, uint64_t hid) noexcept {
    if (__builtin_expect(!inv_hid_set_ || inv != inv_ || hid != hid_, 0)) set_inv_hid(inv, hid);
    std::memcpy(out, inv_hid_, kInvHidCopyBytes);  // the rest is overwritten next
    return out + inv_hid_len_;
  }
  // The longest `<inv> hid=<hid> depth=`: 20 + 5 + 16 + 7 bytes; copied whole.
  static constexpr size_t kInvHidCopyBytes = 48;
  // The longest ` hid=<hid> depth=` (5 + 16 + 7 bytes), kept for the last hid and copied whole
  // after a new inv (room: an inv of 20 digits, then these 32 bytes, in inv_hid_).
  static constexpr size_t kHidCopyBytes = 32;
  static_assert(20 + kHidCopyBytes >= kInvHidCopyBytes);

  DecimalCache times;  // ts and ts + dur of this sink's lines

 private:
  [[gnu::noinline]] void set_owner(uint32_t pid, uint32_t tid) noexcept;
  [[gnu::noinline]] void set_inv_hid(uint64_t inv, uint64_t hid) noexcept;

  uint64_t inv_ = 0;
  uint64_t hid_ = 0;
  bool inv_hid_set_ = false;
  size_t inv_hid_len_ = 0;
  // `<inv> hid=<hid> depth=`; the bytes past inv_hid_len_ are write room (write_decimal's 20
  // and the hid text's kHidCopyBytes).
  char inv_hid_[20 + kHidCopyBytes] = {};
  // ` hid=<hid_text_of_> depth=` (hid_text_len_ bytes) for hid hid_text_of_: a thread's
  // invocations mostly share one hid, so a new inv converts only its own digits.
  uint64_t hid_text_of_ = 0;
  bool hid_text_set_ = false;
  uint32_t hid_text_len_ = 0;
  char hid_text_[kHidCopyBytes + 16] = {};  // write_hex's room past the text
  uint32_t pid_ = 0;
  uint32_t tid_ = 0;
  bool set_ = false;
  size_t len_ = 0;
  char bytes_[kCopyBytes] = {};
};

// format_span, with the owner's part of the line from (and kept in) `owner`: the same bytes.
size_t format_span(char* out, const SpanEvent& e, SpanLineOwner& owner) noexcept;
// The same line for the drained record `rec` of ring owner (pid, tid), the bytes of
// format_span(out, SpanEvent::of(pid, tid, rec), owner) without building the event (the text
// drainer's per-record path: TextSink::span_record).
size_t format_span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec,
                   SpanLineOwner& owner) noexcept;

// The text drainer's direct path from the ring's slots (RingReader::peek_plain): the line
// format_span(out, pid, tid, rec, owner) writes for the ordinary span record whose header is `h`
// (framing checked, times in ns, no marker) and whose raw name and attribute bytes start at
// `payload` (name_len, then attrs_len bytes, packed when h.flags has kRecordPackedAttrs;
// readable rounded up to 16 bytes from each field's start), where `rec` is that record read
// and unpacked, when both fields are copied as they are: no byte to escape, no NUL, each within
// its cap (packed attributes: a well-formed list whose text is plain and not cut). Each payload
// byte is read once (the check and the copy from the same load; packed bytes copied out before
// they are parsed), so the line holds what was checked even if the bytes change meanwhile.
// Returns 0 otherwise (and always without SSE2 or NEON), with `out` partly written and
// `owner`'s caches possibly refreshed (the same bytes either way): the caller then formats the
// record from a RecordCopy. `out` needs room for kPlainLineRoom bytes (packed attributes are
// unpacked in the line with unpack_attrs_fast's room).
inline constexpr size_t kPlainLineRoom = kMaxLineBytes + kAttrsWriteRoom;
size_t format_span_plain(char* out, uint32_t pid, uint32_t tid, const RecordHeader& h,
                         const char* payload, SpanLineOwner& owner) noexcept;

// The same for a compact record `c` (framing checked) whose numbers (times in ns, inv, hid,
// depth) are in `h` and whose strings are resolved in `strings` (compact_string_ids' order: the
// name, then its attribute text or its count keys; each readable for kStringMaxBytes, as the
// string sources keep them): the line format_span writes for the record decode_compact makes of
// it, when the name and the attribute text are copied as they are (the integer attributes
// formatted into the line and checked there, not longer than kAttrsCap); else 0 as above.
// `out` needs room for kPlainLineRoom bytes.
size_t format_span_compact(char* out, uint32_t pid, uint32_t tid, const RecordHeader& h,
                           const CompactRecord& c, const std::string_view* strings,
                           SpanLineOwner& owner) noexcept;
static_assert(kCompactAttrs * (1 + kStringMaxBytes + 22) <= kAttrsWriteRoom);

// Attribute text of more than 32 bytes is checked and copied 32 bytes at a time with AVX2 where
// the CPU has it (chosen at start-up; x86-64), else 16 at a time (SSE2, NEON): the same bytes.
// set_wide_attrs_copy(false) makes every later line take the 16-byte path, (true) the 32-byte
// one where the CPU has AVX2; returns whether the 32-byte path is now used. For tests, which hold
// both paths to the same lines: not thread-safe, call it while no line is being formatted.
bool set_wide_attrs_copy(bool on) noexcept;

// The per-process clock anchor line (the command line is not part of the text format).
size_t format_anchor(char* out, const ProcessEvent& e) noexcept;

// A loss report ([SPANRING_DROPS]; reasons as drop_reason_name() spells them).
size_t format_drops(char* out, const DropsEvent& e) noexcept;

// A span open when its owner died ([SPANRING_UNFINISHED] ... name=... reason=owner_died), and
// the count of those too deep to describe.
size_t format_unfinished(char* out, const UnfinishedEvent& e) noexcept;
size_t format_undescribed(char* out, const UndescribedEvent& e) noexcept;

// The [SPANRING_UNFINISHED] spelling of an open span's raw name (at most kOpenNameBytes kept
// bytes, `cut` when the name went on): encoded unit by unit under kNameCap, `~` marking a cut
// exactly as the [STRACE] spec does, `%3F` when no name was recorded. Writes 3..kNameCap bytes
// at `out` (room for kNameCap) and returns how many.
size_t encode_unfinished_name(char* out, std::string_view raw, bool cut) noexcept;

// True when the raw attributes hold the token `clk=dev` (a device-clock span).
bool is_device_span(const RecordCopy& rec) noexcept;

}  // namespace spanring
