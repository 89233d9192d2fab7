// The record path: Span (begin notes the span in the ring's open-span stack, end writes its
// record), emit and emit_record, and the thread-level record write around the RingWriter.
//
// Hot path (everything here after a thread's first record): no syscall, no lock, no
// allocation; it touches the thread's own ring slots and the producer line of its ring header,
// and reads the drainer's tail only when the ring looks full.
#include "src/producer.h"

#include <spanring/encode.h>
#include <spanring/packed_attrs.h>
#include <spanring/span.h>

#include <charconv>
#include <cstring>

namespace spanring {
namespace {

// Writes one record into the calling thread's ring, claiming one on its first record. name_len
// and attrs_len are already bounded to kNameRawMax and kAttrsRawMax (kAttrsPackedMax for
// kRecordPackedAttrs). Returns false when the record was dropped (and counted).
bool write_record(const char* name, uint32_t name_len, const char* attrs, uint32_t attrs_len,
                  uint64_t ts, uint64_t dur, uint64_t inv, uint64_t hid, uint32_t depth,
                  uint16_t flags) noexcept {
  ThreadState& t = t_state;
  if (t.busy | spanring_vfork_child) {
    if (spanring_vfork_child) {
      // relaxed: a report counter.
      g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    // A signal handler interrupted this thread inside write_record: the ring is SPSC and the
    // interrupted writer owns the slots, so this record is dropped; the interrupted writer
    // publishes a kRecordReentrant marker for it when it finishes.
    t.reentrant_drops.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  t.busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // busy is set before any slot write
  if (t.ring.shared() == nullptr) {
    if (t.no_ring_wait > 0 || !claim_ring(t)) {
      if (t.no_ring_wait == 0) t.no_ring_wait = kNoRingRetry;
      --t.no_ring_wait;
      // relaxed: a report counter with no ordering to other data.
      g_process.header->no_ring_drops.fetch_add(1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      t.busy = 0;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (t.reentrant_drops.load(std::memory_order_relaxed) != 0)
        g_process.header->no_ring_drops.fetch_add(
            t.reentrant_drops.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
      return false;
    }
  }
  const bool stored = t.ring.write(name, name_len, attrs, attrs_len, ts, dur, inv, hid, depth,
                                   flags);
  // Records our own signal handlers refused meanwhile get a marker, written while still busy; a
  // handler that runs between the last check and busy = 0 is caught by the check after it.
  // relaxed: the counter is thread-local; the atomic only guards against our own handlers.
  // (A plain load first: the exchange is a locked instruction, too dear for every record.)
  for (;;) {
    if (t.reentrant_drops.load(std::memory_order_relaxed) != 0)
      t.ring.write_reentrant_marker(
          t.reentrant_drops.exchange(0, std::memory_order_relaxed));
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.busy = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (t.reentrant_drops.load(std::memory_order_relaxed) == 0) break;
    t.busy = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  return stored;
}

// A caller-supplied start before the process' clock anchor (a span begun before attach, or a
// timestamp taken elsewhere): [STRACE] consumers convert ts to wall time only from the anchor on,
// and later explicit records may start earlier still. So the process' anchor is announced at the
// clock's origin, (mono 0, wall - mono): the same offset, before every host timestamp. The flag
// goes to the process and to the caller's ring before the record is published, so the drainer,
// which announces a process when it reads its first record, sees it. Device spans (clk=dev) are
// on another clock and never move it.
void lower_anchor(const char* attrs, uint32_t attrs_len) noexcept {
  if (attrs != nullptr && is_device_attrs(std::string_view(attrs, attrs_len))) return;
  // relaxed: the record's release of head orders the ring's flag for the drainer.
  std::atomic_ref(g_process.anchor_origin).store(1, std::memory_order_relaxed);
  if (RingHeader* r = t_state.ring.shared()) r->anchor_origin.store(1, std::memory_order_relaxed);
}

// Whether an explicit record starting at ts_ns must move the anchor (see lower_anchor).
inline bool before_anchor(int64_t ts_ns) noexcept {
  // relaxed: a flag this process only ever sets; a stale 0 costs one redundant store.
  return ts_ns >= 0 && static_cast<uint64_t>(ts_ns) < g_process.anchor_mono_ns &&
         std::atomic_ref(g_process.anchor_origin).load(std::memory_order_relaxed) == 0;
}

uint32_t bounded_len(const char* s, uint32_t max) noexcept {
  return s == nullptr ? 0 : static_cast<uint32_t>(strnlen(s, max));
}

// flags: 0 or kRecordTsc (ts and dur in TSC ticks).
bool emit_checked(const char* name, uint32_t name_len, uint64_t inv, uint64_t hid, int64_t depth,
                  int64_t ts, int64_t dur, const char* attrs, uint32_t attrs_len,
                  uint16_t flags = 0) noexcept {
  if (name_len == 0 || ts < 0 || dur < 0 || depth < 0) {
    // A [STRACE] consumer silently drops empty names and negative numbers: publish a drop
    // marker instead, so the loss is reported with its reason.
    write_record(nullptr, 0, nullptr, 0, 0, 0, inv, hid, 0, kRecordInvalid);
    return false;
  }
  return write_record(name, name_len, attrs, attrs_len, static_cast<uint64_t>(ts),
                      static_cast<uint64_t>(dur), inv, hid, static_cast<uint32_t>(depth), flags);
}

}  // namespace

bool emit_record(const char* name, uint64_t inv, uint64_t hid, int32_t depth, int64_t ts_ns,
                 int64_t dur_ns, const char* attrs) noexcept {
  if (!enabled()) return false;
  const uint32_t attrs_len = bounded_len(attrs, kAttrsRawMax);
  if (before_anchor(ts_ns)) lower_anchor(attrs, attrs_len);
  return emit_checked(name, bounded_len(name, kNameRawMax), inv, hid, depth, ts_ns, dur_ns, attrs,
                      attrs_len);
}

bool emit(const char* name, int64_t ts_ns, int64_t dur_ns, const char* attrs) noexcept {
  if (!enabled()) return false;
  const ThreadState& t = t_state;
  const uint32_t attrs_len = bounded_len(attrs, kAttrsRawMax);
  if (before_anchor(ts_ns)) lower_anchor(attrs, attrs_len);
  return emit_checked(name, bounded_len(name, kNameRawMax), t.inv, t.hid, t.depth, ts_ns, dur_ns,
                      attrs, attrs_len);
}

Invocation::Invocation(uint64_t inv, uint64_t hid) noexcept {
  ThreadState& t = t_state;
  saved_inv_ = t.inv;
  saved_hid_ = t.hid;
  t.inv = inv;
  t.hid = hid;
}

Invocation::~Invocation() {
  ThreadState& t = t_state;
  t.inv = saved_inv_;
  t.hid = saved_hid_;
}

void Span::begin(const char* name, size_t name_len) noexcept {
  if (spanring_vfork_child) {
    // A vfork child must not touch its parent's ring or depth (it shares the parent's memory).
    g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
    return;  // name_ stays null: the span is inactive
  }
  ThreadState& t = t_state;
  name_ = name != nullptr ? name : "";  // an empty name is reported as an invalid record
  if (name_len == kNameLenUnknown || name == nullptr) name_len = strnlen(name_, kNameRawMax);
  name_len_ = static_cast<uint16_t>(name_len < kNameRawMax ? name_len : kNameRawMax);
  depth_ = t.depth++;
  inv_ = t.inv;
  hid_ = t.hid;
  attrs_len_ = 0;
  packed_ = true;
  tsc_ = g_process.use_tsc;
  start_ = tsc_ ? static_cast<int64_t>(read_tsc()) : now_ns();
  if (t.ring.shared() == nullptr && t.busy == 0 && t.no_ring_wait == 0) {
    // The thread's first record-to-be claims its ring now, so that this span is described in
    // the ring's open-span stack if the process dies before it ends.
    t.busy = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!claim_ring(t)) t.no_ring_wait = kNoRingRetry;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.busy = 0;
  }
  RingHeader* const ring = t.ring.shared();
  if (ring != nullptr && depth_ < kOpenSpanMax) {
    OpenSpan& o = ring->open[depth_];
    const uint32_t n = name_len_;
    o.ts_ns = static_cast<uint64_t>(start_);
    o.inv = inv_;
    o.hid = hid_;
    o.depth = depth_;
    o.name_len = static_cast<uint8_t>(n < kOpenNameBytes ? n : kOpenNameBytes);
    o.flags = static_cast<uint8_t>((n > kOpenNameBytes ? kOpenNameCut : 0) | (tsc_ ? kOpenTsc : 0));
    o.name_id = 0;
    RingWriter::copy_small(o.name, name_, o.name_len);
  }
  if (ring != nullptr) {
    // relaxed: read by the drainer only once this process is dead.
    ring->open_depth.store(depth_ + 1, std::memory_order_relaxed);
  }
}

void Span::end() noexcept {
  const int64_t end = tsc_ ? static_cast<int64_t>(read_tsc()) : now_ns();
  ThreadState& t = t_state;
  t.depth -= 1;
  // TSC ticks of two CPUs can differ by a few ticks on some hosts: never a negative duration.
  emit_checked(name_, name_len_, inv_, hid_, depth_, start_, end > start_ ? end - start_ : 0,
               attrs_, attrs_len_,
               static_cast<uint16_t>((tsc_ ? kRecordTsc : 0) |
                                     (packed_ && attrs_len_ != 0 ? kRecordPackedAttrs : 0)));
  // After the record is published: a process killed in between reports the span both written
  // and open, which the drainer recognises (the last record has its ts and depth); lowering the
  // depth first would lose it silently.
  if (RingHeader* ring = t.ring.shared(); ring != nullptr && spanring_vfork_child == 0)
    ring->open_depth.store(depth_, std::memory_order_relaxed);
}

void Span::append(std::string_view text) noexcept {
  // Keep at most kAttrsRawMax raw bytes: one byte past the encoded cap tells the drainer the
  // attributes went on, so it cuts them with `~` exactly as the [STRACE] spec says.
  const size_t room = kAttrsRawMax - attrs_len_;
  const size_t n = text.size() < room ? text.size() : room;
  std::memcpy(attrs_ + attrs_len_, text.data(), n);
  attrs_len_ = static_cast<uint16_t>(attrs_len_ + n);
}

// The packed tokens become the text they stand for, and the span goes on in text.
void Span::unpack() noexcept {
  char packed[kAttrsPackedMax];
  std::memcpy(packed, attrs_, attrs_len_);
  // A list this Span packed is well-formed: unpack_attrs cannot fail here.
  const int32_t n = unpack_attrs(packed, attrs_len_, attrs_, kAttrsRawMax);
  attrs_len_ = static_cast<uint16_t>(n > 0 ? n : 0);
  packed_ = false;
}

// An integer attribute the inline attr() could not pack (its check assumes 8 value bytes): packed
// when the token still fits exactly, else as text after unpacking, cut at the limit.
void Span::append_number(std::string_view key, bool negative, uint64_t magnitude) noexcept {
  if (packed_) {
    if (key.size() <= kAttrsRawMax && attrs_len_ + kPackedTokenFixed + key.size() +
                                              packed_value_bytes(magnitude) <= kAttrsPackedMax) {
      char token[kPackedTokenFixed + kAttrsRawMax + 8];  // pack_token stores 8 value bytes
      const uint32_t n = pack_token(token, key.data(), static_cast<uint32_t>(key.size()),
                                    negative ? kPackedNegative : kPackedUnsigned, magnitude);
      std::memcpy(attrs_ + attrs_len_, token, n);
      attrs_len_ = static_cast<uint16_t>(attrs_len_ + n);
      return;
    }
    unpack();
  }
  char buf[22];  // "=-" and 20 digits
  char* p = buf;
  *p++ = '=';
  if (negative) *p++ = '-';
  p = std::to_chars(p, buf + sizeof buf, magnitude).ptr;
  if (attrs_len_ != 0) append(" ");
  append(key);
  append({buf, static_cast<size_t>(p - buf)});
}

void Span::append_uint(std::string_view key, uint64_t value) noexcept {
  append_number(key, false, value);
}

void Span::append_int(std::string_view key, int64_t value) noexcept {
  // 0 - magnitude is well-defined for INT64_MIN.
  append_number(key, value < 0,
                value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value));
}

void Span::append_text(std::string_view key, std::string_view value) noexcept {
  if (packed_) unpack();
  if (attrs_len_ != 0) append(" ");
  append(key);
  append("=");
  append(value);
}

}  // namespace spanring
