// The record path: Span (begin notes the span in the ring's open-span stack, end writes its
// record), emit and emit_record, and the thread-level record write around the RingWriter.
//
// Hot path (everything here after a thread's first record): no syscall, no lock, no
// allocation; it touches the thread's own ring slots and the producer line of its ring header,
// and reads the drainer's tail only when the ring looks full.
#include "src/producer.h"
#include "src/string_table.h"
#include "src/text_copy.h"

#include <spanring/encode.h>
#include <spanring/packed_attrs.h>
#include <spanring/span.h>

#include <charconv>
#include <cstring>

namespace spanring {
namespace {

// ---- the record write

// Runs `write(RingWriter&)`, which writes one record into the calling thread's ring, claiming
// one on its first record, under the thread's guard: a vfork child's record is dropped
// (vfork_drops); a signal handler's record while this thread is inside a write is dropped and
// later announced by a kRecordReentrant marker. Returns what `write` returned (false: dropped
// and counted), false when dropped here.
template <class Write>
inline bool guarded_write(Write&& write) noexcept {
  if (__builtin_expect(spanring_vfork_child, 0)) {
    // relaxed: a report counter.
    g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  ThreadState* const self = thread_state();
  if (__builtin_expect(self == nullptr, 0)) {
    // No state could be mapped for this thread, so no ring either. relaxed: a report counter.
    g_process.header->no_ring_drops.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  ThreadState& t = *self;
  if (__builtin_expect((t.ring.gate() & kGateBusy) != 0, 0)) {
    if (spanring_vfork_child) {
      // relaxed: a report counter.
      g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    // A signal handler interrupted this thread inside a write: the ring is SPSC and the
    // interrupted writer owns the slots, so this record is dropped; the interrupted writer
    // publishes a kRecordReentrant marker for it when it finishes.
    t.reentrant_drops.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  t.ring.gate_or(kGateBusy);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // busy is set before any slot write
  if (__builtin_expect(t.ring.shared() == nullptr, 0)) {
    if (t.no_ring_wait > 0 || !claim_ring(t)) {
      if (t.no_ring_wait == 0) t.no_ring_wait = kNoRingRetry;
      --t.no_ring_wait;
      // relaxed: a report counter with no ordering to other data.
      g_process.header->no_ring_drops.fetch_add(1, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      t.ring.gate_clear(kGateBusy);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (t.reentrant_drops.load(std::memory_order_relaxed) != 0)
        g_process.header->no_ring_drops.fetch_add(
            t.reentrant_drops.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
      return false;
    }
  }
  const bool stored = write(t.ring);
  // Records our own signal handlers refused meanwhile get a marker, written while still busy; a
  // handler that runs between the last check and clearing kGateBusy is caught by the check
  // after it.
  // relaxed: the counter is thread-local; the atomic only guards against our own handlers.
  // (A plain load first: the exchange is a locked instruction, too dear for every record.)
  for (;;) {
    if (__builtin_expect(reentrant_pending(t), 0))
      t.ring.write_reentrant_marker(
          t.reentrant_drops.exchange(0, std::memory_order_relaxed));
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.ring.gate_clear(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (__builtin_expect(!reentrant_pending(t), 1)) break;
    t.ring.gate_or(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  return stored;
}

// Writes one ordinary record. name_len and attrs_len are already bounded to kNameRawMax and
// kAttrsRawMax (kAttrsPackedMax for kRecordPackedAttrs). Returns false when the record was
// dropped (and counted).
__attribute__((always_inline)) inline bool write_record(
    const char* name, uint32_t name_len, const char* attrs, uint32_t attrs_len, uint64_t ts,
    uint64_t dur, uint64_t inv, uint64_t hid, uint32_t depth,
                  uint16_t flags) noexcept {
  return guarded_write([&](RingWriter& ring) {
    return ring.write(name, name_len, attrs, attrs_len, ts, dur, inv, hid, depth, flags);
  });
}

// A caller-supplied start before the process' clock anchor (a span begun before attach, or a
// timestamp taken elsewhere): [STRACE] consumers convert ts to wall time only from the anchor on,
// and later explicit records may start earlier still. So the process' anchor is announced at the
// clock's origin, (mono 0, wall - mono): the same offset, before every host timestamp. The flag
// goes to the process and to the caller's ring before the record is published, so the drainer,
// which announces a process when it reads its first record, sees it. Device spans (clk=dev) are
// on another clock and never move it.
__attribute__((noinline, cold)) void lower_anchor(const char* attrs,
                                                  uint32_t attrs_len) noexcept {
  if (attrs != nullptr && is_device_attrs(std::string_view(attrs, attrs_len))) return;
  // relaxed: the record's release of head orders the ring's flag for the drainer.
  std::atomic_ref(g_process.anchor_origin).store(1, std::memory_order_relaxed);
  if (!has_state(t_self)) return;  // no ring yet: claim_ring copies the process' flag
  if (RingHeader* r = t_self->ring.shared()) {
    r->anchor_origin.store(1, std::memory_order_relaxed);
    t_self->early_ns = -1;  // the inline emit no longer needs to ask (span.h)
  }
}

// Whether an explicit record starting at ts_ns must move the anchor (see lower_anchor).
inline bool before_anchor(int64_t ts_ns) noexcept {
  // relaxed: a flag this process only ever sets; a stale 0 costs one redundant store.
  if (__builtin_expect(ts_ns < 0 || static_cast<uint64_t>(ts_ns) >= g_process.anchor_mono_ns, 1))
    return false;
  if (std::atomic_ref(g_process.anchor_origin).load(std::memory_order_relaxed) == 0) return true;
  // Another thread announced the anchor: this thread's inline emit need not ask again.
  if (has_state(t_self)) t_self->early_ns = -1;
  return false;
}

inline uint32_t bounded_len(const char* s, uint32_t max) noexcept {
  return s == nullptr ? 0 : static_cast<uint32_t>(strnlen(s, max));
}

// flags: 0 or kRecordTsc (ts and dur in TSC ticks).
__attribute__((always_inline)) inline bool emit_checked(
    const char* name, uint32_t name_len, uint64_t inv, uint64_t hid, int64_t depth, int64_t ts,
    int64_t dur, const char* attrs, uint32_t attrs_len, uint16_t flags = 0) noexcept {
  if (__builtin_expect(name_len == 0 || ts < 0 || dur < 0 || depth < 0, 0)) {
    // A [STRACE] consumer silently drops empty names and negative numbers: publish a drop
    // marker instead, so the loss is reported with its reason.
    write_record(nullptr, 0, nullptr, 0, 0, 0, inv, hid, 0, kRecordInvalid);
    return false;
  }
  return write_record(name, name_len, attrs, attrs_len, static_cast<uint64_t>(ts),
                      static_cast<uint64_t>(dur), inv, hid, static_cast<uint32_t>(depth), flags);
}

}  // namespace

bool write_span_record(const char* name, uint32_t name_len, const char* attrs, uint32_t attrs_len,
                       uint64_t inv, uint64_t hid, uint32_t depth, int64_t ts, int64_t dur,
                       uint16_t flags) noexcept {
  return emit_checked(name, name_len, inv, hid, depth, ts, dur, attrs, attrs_len, flags);
}

namespace {

// Everything record_any's common case leaves: an invalid record (counted as such), a thread
// without a ring or state, a busy thread (a signal handler inside a write), a vfork child, a
// start before the clock anchor its ring announced. Out of line: its stack frame (the guard,
// the ring claim, the anchor) is not set up for the common case. It reads the numbers from
// `s` again; the strings come as record_any measured them.
__attribute__((noinline, cold)) bool record_any_slow(const spanring_span& s, const char* name,
                                                     uint32_t name_len, const char* attrs,
                                                     uint32_t attrs_len) noexcept {
  // Only a record that will be published may move the anchor: an invalid one is a drop marker.
  if (name_len != 0 && s.duration_ns >= 0 && s.depth >= 0 && before_anchor(s.timestamp_ns))
    lower_anchor(attrs, attrs_len);
  return emit_checked(name, name_len, s.invocation_id, s.callable_hash, s.depth, s.timestamp_ns,
                      s.duration_ns, attrs, attrs_len);
}

// record_any for a ring that may wrap or be nearly full (and everything record_any_slow takes):
// the strings measured with strnlen, the record written by RingWriter::write.
__attribute__((noinline)) bool record_any_measured(const spanring_span& s, const char* name,
                                                   const char* attrs) noexcept {
  const uint32_t name_len = bounded_len(name, kNameRawMax);
  const uint32_t attrs_len = bounded_len(attrs, kAttrsRawMax);
  // The numbers are read after the lengths: held across the two calls they would each take a
  // saved register.
  const int64_t ts_ns = s.timestamp_ns;
  const int64_t dur_ns = s.duration_ns;
  const int32_t depth = s.depth;
  // The common case first, with one test per condition: a valid record (a name, nothing
  // negative), a thread with a ring, not busy, not a vfork child, ts not before what its ring
  // announced (early_ns: then before_anchor is false too). Everything else: record_any_slow.
  ThreadState* const t = t_self;
  if (__builtin_expect(text_gate_open(*t) && name_len != 0 &&
                           (ts_ns | dur_ns | depth) >= 0 &&
                           ts_ns > t->early_ns,
                       1)) {
    t->ring.gate_or(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // busy is set before any slot write
    const bool stored = t->ring.write(name, name_len, attrs, attrs_len,
                                      static_cast<uint64_t>(ts_ns), static_cast<uint64_t>(dur_ns),
                                      s.invocation_id, s.callable_hash,
                                      static_cast<uint32_t>(depth), 0);
    detail::release_busy(*t);
    return stored;
  }
  return record_any_slow(s, name, name_len, attrs, attrs_len);
}

// record_any's fast path found the record invalid or before the ring's anchor after copying
// it (busy still set): busy released, then record_any_slow with the lengths copied. Out of line
// and a tail call, like the two below: record_any then holds nothing across a call, so its
// common case saves no registers.
__attribute__((noinline, cold)) bool record_any_refused(ThreadState& t, const spanring_span& s,
                                                        const char* name, uint32_t name_len,
                                                        const char* attrs,
                                                        uint32_t attrs_len) noexcept {
  detail::release_busy(t);
  return record_any_slow(s, name, name_len, attrs, attrs_len);
}

// record_any's fast path found too few free slots before the ring's end (busy still set).
__attribute__((noinline)) bool record_any_busy_measured(ThreadState& t, const spanring_span& s,
                                                        const char* name,
                                                        const char* attrs) noexcept {
  detail::release_busy(t);
  return record_any_measured(s, name, attrs);
}

}  // namespace

bool record_any(const spanring_span& s) noexcept {
  // The pointers are read once: the lengths measured are those of the bytes copied.
  const char* const name = s.name;
  const char* const attrs = s.attributes;
  ThreadState* const t = t_self;
  // The common case: a thread with a ring, not busy, not a vfork child, and 6 free slots from
  // head that do not wrap (RingWriter::text_room). The strings are measured while they are
  // copied into the ring (copy_measured: one pass, no strnlen calls), then the header is
  // written and the record published. Busy from before the copy: a signal handler's record
  // meanwhile would take the same slots. Anything else: the measured path below.
  if (__builtin_expect(text_gate_open(*t), 1)) {
    t->ring.gate_or(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // busy is set before any slot write
    if (__builtin_expect(t->ring.text_room(), 1)) {
      char* const dst = t->ring.text_payload();
      static_assert(kNameRawMax + kAttrsRawMax + kCopyMeasuredOvershoot <=
                    kInlinePayloadBytes + (RingWriter::kTextRoomSlots - 1) * kSlotBytes);
      const uint32_t name_len = copy_measured(dst, name, kNameRawMax);
      const uint32_t attrs_len = copy_measured(dst + name_len, attrs, kAttrsRawMax);
      const int64_t ts_ns = s.timestamp_ns;
      const int64_t dur_ns = s.duration_ns;
      const int32_t depth = s.depth;
      // A valid record (a name, nothing negative) not before what the ring announced
      // (early_ns: then before_anchor is false too).
      if (__builtin_expect(name_len != 0 && (ts_ns | dur_ns | depth) >= 0 &&
                               ts_ns > t->early_ns,
                           1)) {
        t->ring.commit_text(dst, name_len, attrs_len, static_cast<uint64_t>(ts_ns),
                            static_cast<uint64_t>(dur_ns), s.invocation_id, s.callable_hash,
                            static_cast<uint32_t>(depth), 0);
        detail::release_busy(*t);
        return true;
      }
      return record_any_refused(*t, s, name, name_len, attrs, attrs_len);
    }
    return record_any_busy_measured(*t, s, name, attrs);
  }
  return record_any_measured(s, name, attrs);
}

bool emit_record(const char* name, uint64_t inv, uint64_t hid, int32_t depth, int64_t ts_ns,
                 int64_t dur_ns, const char* attrs) noexcept {
  if (!enabled()) return false;
  const spanring_span s{inv, hid, depth, 0, ts_ns, dur_ns, name, attrs};
  return record_any(s);
}

namespace detail {

void flush_reentrant(ThreadState& t) noexcept {
  // The marker is written while busy; a handler that runs between the last check and clearing
  // kGateBusy is caught by the check after it. relaxed: the counter is thread-local; the atomic only
  // guards against our own handlers.
  for (;;) {
    t.ring.gate_or(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (t.reentrant_drops.load(std::memory_order_relaxed) != 0)
      t.ring.write_reentrant_marker(t.reentrant_drops.exchange(0, std::memory_order_relaxed));
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.ring.gate_clear(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (__builtin_expect(t.reentrant_drops.load(std::memory_order_relaxed) == 0, 1)) return;
  }
}

uint16_t string_id_slow(ModuleStrings& table, const char* p, uint32_t len) noexcept {
  // acquire: pairs with attach's release of the generation (with the segment's geometry).
  const uint32_t generation = g_attach_generation.load(std::memory_order_acquire);
  if (table.generation.load(std::memory_order_relaxed) != generation) {
    // The words name ids of an older attach's string table: forget them. relaxed: attach is
    // done before any thread records (span.h), so no other thread fills the table meanwhile.
    for (auto& word : table.words) word.store(0, std::memory_order_relaxed);
    // A serial no other emptying took (never 0): KeyMemo entries of the table's old contents,
    // or of an unloaded module's table at this address, no longer match. relaxed: a counter.
    static std::atomic<uint32_t> serials{0};
    uint32_t serial = serials.fetch_add(1, std::memory_order_relaxed) + 1;
    if (serial == 0) serial = serials.fetch_add(1, std::memory_order_relaxed) + 1;
    table.serial.store(serial, std::memory_order_relaxed);
    table.generation.store(generation, std::memory_order_relaxed);
  }
  if (len == 0) len = static_cast<uint32_t>(strnlen(p, kStringMaxBytes + 1));
  const uint16_t id = intern(g_process.strings, p, len, &g_process.header->strings_full);
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  // release: pairs with string_id's acquire, so a thread that finds the id also sees the entry
  // kStringReady (this thread acquired that in intern), and the drainer, acquiring the head
  // that thread publishes, does too.
  if ((at >> 48) == 0)
    table.words[(at * 0x9e3779b97f4a7c15ull) >> (64 - kModuleStringBits)].store(
        at << 16 | id, std::memory_order_release);
  return id;
}

uint16_t site_name_slow(SpanSite& site, const char* p, uint32_t len) noexcept {
  // acquire: pairs with attach's release of the generation (with the segment's geometry).
  const uint32_t generation = g_attach_generation.load(std::memory_order_acquire);
  // relaxed: only compared; the CAS below decides.
  uint64_t seen = site.name.load(std::memory_order_relaxed);
  if ((seen >> 32) == generation) return static_cast<uint16_t>(seen);  // filled meanwhile
  const uint16_t id = intern(g_process.strings, p, len, &g_process.header->strings_full);
  // The record's word 6 for the id (span.h, SpanSite::name_head), before the word's release.
  // relaxed: published by the CAS below; a thread that loses the CAS stored the same value.
  if (id != 0)
    site.name_head.store(RingWriter::compact_word6(kRecordCompact | kRecordTsc, id, 0),
                         std::memory_order_relaxed);
  // release: pairs with site_name_id's acquire, so a thread that finds the id also sees the
  // entry kStringReady (this thread acquired that in intern), as string_id_slow's words. A CAS
  // from the word seen: when another thread stored this generation's word first, its id is
  // the same entry (intern finds equal bytes) and stays; acquire on failure for the same reason.
  // kGateOpen marks a valid id (span.h, SpanSite::name): the word of a name without one never
  // passes Span's test against an open gate.
  if (site.name.compare_exchange_strong(seen,
                                        uint64_t{generation} << 32 |
                                            (id != 0 ? uint64_t{kGateOpen} | id : 0),
                                        std::memory_order_release, std::memory_order_acquire) ||
      (seen >> 32) != generation)
    return id;
  return static_cast<uint16_t>(seen);
}

bool emit_site_slow(EmitSite& site, const char* name, uint32_t name_len, const char* attrs,
                    uint32_t attrs_len, int64_t ts_ns, int64_t dur_ns) noexcept {
  // acquire: pairs with attach's release of the generation (with the segment's geometry).
  const uint64_t generation = g_attach_generation.load(std::memory_order_acquire);
  // acquire: pairs with the filler's release below, so `head` is the filler's.
  uint64_t seen = site.word.load(std::memory_order_acquire);
  uint16_t name_id;
  uint16_t attrs_id;
  if ((seen >> 32) == generation && (seen & kEmitSiteBusy) == 0) {
    // Filled for this generation: the ids from the record's word 6 (name, keys[0]).
    // relaxed: ordered by the acquire of `word`.
    const uint64_t head = site.head.load(std::memory_order_relaxed);
    name_id = static_cast<uint16_t>(head >> 32);
    attrs_id = static_cast<uint16_t>(head >> 48);
  } else {
    name_id = intern(g_process.strings, name, name_len, &g_process.header->strings_full);
    attrs_id = attrs_len == 0 ? 0
                              : intern(g_process.strings, attrs, attrs_len,
                                       &g_process.header->strings_full);
    // Fill the site when it holds another generation's ids (or none) and no other thread
    // claimed it: a CAS to busy, `head`, then `word` with release. A site being filled (busy)
    // is left to its filler; this record used its own ids.
    // acquire on success: the claim is ordered before the stores below as seen by this thread;
    // no reader reads `head` while the word says busy.
    if ((seen >> 32) != generation &&
        site.word.compare_exchange_strong(seen, generation << 32 | kEmitSiteBusy,
                                          std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
      site.head.store(RingWriter::compact_word6(kRecordCompact, name_id, attrs_id),
                      std::memory_order_relaxed);
      const bool compact = name_id != 0 && (attrs_id != 0 || attrs_len == 0);
      // release: a thread that acquires this word sees `head` and the string entries ready
      // (this thread acquired them in intern). kGateOpen marks a site whose record can be
      // compact, kEmitSiteOrdinary one whose record cannot (span.h, EmitSite).
      site.word.store(generation << 32 | (compact ? uint64_t{kGateOpen} : kEmitSiteOrdinary),
                      std::memory_order_release);
    }
  }
  return emit_literal(name, name_len, name_id, attrs, attrs_len, attrs_id, ts_ns, dur_ns);
}

namespace {
// Stores the key set of a span of `site` (`keys`: kCompactAttrs pointers, null past `count`,
// 1..kCompactAttrs; `ids` their ids and `name_id` the site's name's id, in the current
// generation) in the site when the site holds no set of this generation (span.h, SpanSite):
// claimed with a CAS on keys_tag (busy), the pointers and the record's words 6 and 7 stored,
// then the tag published with release. A site already holding this generation's set (another
// span's keys) or being filled by another thread is left alone.
void site_fill_keys(SpanSite& site, const char* const* keys, uint32_t count, uint16_t name_id,
                    uint64_t ids) noexcept {
  // acquire: as in site_name_slow.
  const uint64_t generation = g_attach_generation.load(std::memory_order_acquire);
  // relaxed: only compared; the CAS decides.
  uint64_t seen = site.keys_tag.load(std::memory_order_relaxed);
  if ((seen >> 32) == generation) return;
  // acquire: the claim is ordered before the stores below as seen by this thread; no reader
  // reads the set while the tag says busy.
  if (!site.keys_tag.compare_exchange_strong(seen, generation << 32 | kSiteKeysBusy,
                                             std::memory_order_acquire,
                                             std::memory_order_relaxed))
    return;
  // Plain stores (SpanSite::keys, keys_head, keys_tail), published by the tag's release below.
  for (uint32_t i = 0; i < kCompactAttrs; ++i) site.keys[i] = i < count ? keys[i] : nullptr;
  // Words 6 and 7 of the CompactRecord Span::finish writes for this set (span.h): the flags it
  // writes (timed by the counter), the attribute byte's count (its negative bits are the span's).
  site.keys_head = RingWriter::compact_word6(kRecordCompact | kRecordTsc, name_id, ids);
  site.keys_tail = ids >> 16 | uint64_t{count} << 56;
  // release: a reader that acquires this tag (site_keys_match) sees the fields above.
  site.keys_tag.store(generation << 32 | kSiteKeysFilled, std::memory_order_release);
}

// The calling thread's invocation, hid and depth; zeros when it has no state (a record that
// then finds no state either is dropped and counted by guarded_write).
struct Context {
  uint64_t inv = 0;
  uint64_t hid = 0;
  uint32_t depth = 0;
};
inline Context context() noexcept {
  const ThreadState* t = thread_state();
  return t != nullptr ? Context{t->inv, t->hid, t->depth} : Context{};
}
}  // namespace

bool emit_text(const char* name, int64_t ts_ns, int64_t dur_ns, const char* attrs) noexcept {
  const Context t = context();
  const uint32_t attrs_len = bounded_len(attrs, kAttrsRawMax);
  const uint32_t name_len = bounded_len(name, kNameRawMax);
  // Only a record that will be published may move the anchor (emit_checked's test).
  if (name_len != 0 && dur_ns >= 0 && before_anchor(ts_ns)) lower_anchor(attrs, attrs_len);
  return emit_checked(name, name_len, t.inv, t.hid, t.depth, ts_ns, dur_ns, attrs, attrs_len);
}

bool emit_literal(const char* name, uint32_t name_len, uint16_t name_id, const char* attrs,
                  uint32_t attrs_len, uint16_t attrs_id, int64_t ts_ns, int64_t dur_ns) noexcept {
  const Context t = context();
  // Only a record that will be published may move the anchor (a negative dur is invalid).
  if (__builtin_expect(name_len != 0 && dur_ns >= 0 && before_anchor(ts_ns), 0))
    lower_anchor(attrs, attrs_len);
  const uint32_t depth = t.depth;
  // Compact: both ids known, ts and dur in range (negative ones are invalid: emit_checked).
  if (ts_ns >= 0 && static_cast<uint64_t>(dur_ns) <= 0xffffffffu && depth <= 0xff) {
    if (name_id != 0 && (attrs_id != 0 || attrs_len == 0)) {
      const uint64_t inv = t.inv;
      const uint64_t hid = t.hid;
      return guarded_write([&](RingWriter& ring) {
        if (__builtin_expect(!ring.compact_allowed(), 0))
          return ring.write(name, name_len, attrs, attrs_len, static_cast<uint64_t>(ts_ns),
                            static_cast<uint64_t>(dur_ns), inv, hid, depth, 0);
        static constexpr uint32_t kNoValues[kCompactAttrs] = {};
        return ring.write_compact(static_cast<uint64_t>(ts_ns), inv, hid, kNoValues,
                                  static_cast<uint32_t>(dur_ns), kRecordCompact, name_id,
                                  attrs_id, static_cast<uint8_t>(depth),
                                  attrs_id != 0 ? kCompactAttrsText : 0);
      });
    }
  }
  return emit_checked(name, name_len, t.inv, t.hid, depth, ts_ns, dur_ns, attrs, attrs_len);
}

}  // namespace detail

Invocation::Invocation(uint64_t inv, uint64_t hid) noexcept {
  ThreadState* const t = thread_state();
  if (t == nullptr) {  // no state could be mapped: the scope sets nothing
    saved_inv_ = saved_hid_ = 0;
    return;
  }
  saved_inv_ = t->inv;
  saved_hid_ = t->hid;
  t->inv = inv;
  t->hid = hid;
}

Invocation::~Invocation() {
  if (ThreadState* const t = t_self; has_state(t)) {
    t->inv = saved_inv_;
    t->hid = saved_hid_;
  }
}

detail::SpanData Span::begin(const char* name, size_t name_len, uint16_t name_id,
                             detail::ModuleStrings* strings, detail::SpanSite* site) noexcept {
  detail::SpanData d;
  d.begin(name, name_len, name_id, strings, site);
  return d;
}

void detail::SpanData::begin(const char* name, size_t name_len, uint16_t name_id,
                             detail::ModuleStrings* strings, detail::SpanSite* site) noexcept {
  site_ = site;
  if (spanring_vfork_child) {
    // A vfork child must not touch its parent's ring or depth (it shares the parent's memory).
    g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
    name_ = nullptr;  // the span is inactive
    return;
  }
  ThreadState* const self = thread_state();
  if (__builtin_expect(self == nullptr, 0)) {
    // No state could be mapped for this thread: the span is dropped and counted.
    g_process.header->no_ring_drops.fetch_add(1, std::memory_order_relaxed);
    name_ = nullptr;
    return;
  }
  ThreadState& t = *self;
  if (name_len == kNameLenUnknown) {
    if (name == nullptr) name = "";  // an empty name is reported as an invalid record
    name_len = strnlen(name, kNameRawMax);
  }
  name_ = name;
  inline_ = 0;  // ends through end(): its fields are not those finish() assumes
  name_len_ = static_cast<uint16_t>(name_len < kNameRawMax ? name_len : kNameRawMax);
  name_id_ = name_id;
  strings_ = name_id != 0 ? strings : nullptr;
  const uint32_t depth = t.depth;
  store_depth(t, depth, depth + 1);
  depth_ = depth;
  inv_ = t.inv;
  hid_ = t.hid;
  count_ = 0;
  negative_ = 0;
  spilled_ = 0;
  packed_ = true;
  attrs_len_ = 0;
  const bool tsc = g_process.use_tsc;
  tsc_ = tsc;
  const int64_t start = tsc ? static_cast<int64_t>(read_tsc()) : now_ns();
  start_ = start;
  if (__builtin_expect(t.ring.shared() == nullptr, 0) && (t.ring.gate() & kGateBusy) == 0 &&
      t.no_ring_wait == 0) {
    // The thread's first record-to-be claims its ring now, so that this span is described in
    // the ring's open-span stack if the process dies before it ends.
    t.ring.gate_or(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!claim_ring(t)) t.no_ring_wait = kNoRingRetry;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.ring.gate_clear(kGateBusy);
  }
  RingHeader* const ring = t.ring.shared();
  if (ring == nullptr) return;
  if (depth < kOpenSpanMax) {
    OpenSpan& o = ring->open[depth];
    o.ts_ns = static_cast<uint64_t>(start);
    o.inv = inv_;
    if (name_id != 0) {
      // An interned name: its id, no bytes.
      o.name_len = 0;
      o.flags = tsc ? kOpenTsc : 0;
      o.name_id = name_id;
    } else {
      const uint32_t n = name_len_;
      o.name_len = static_cast<uint8_t>(n < kOpenNameBytes ? n : kOpenNameBytes);
      o.flags =
          static_cast<uint8_t>((n > kOpenNameBytes ? kOpenNameCut : 0) | (tsc ? kOpenTsc : 0));
      o.name_id = 0;
      RingWriter::copy_small(o.name, name_, o.name_len);
    }
  }
  // relaxed: read by the drainer only once this process is dead.
  ring->open_depth.store(depth + 1, std::memory_order_relaxed);
}

// The string ids of the compact keys into `keys` (key i in bits 16i..): from the thread's memo
// of the last key set of a span of this name when the keys are the same pointers of the same
// table (compares only), else looked up one by one in strings_ and memoized. False when a key
// has no id. Inside the thread's guard only (the memo is not signal-safe otherwise).
__attribute__((always_inline)) inline bool detail::SpanData::key_ids(detail::KeyMemo* memos,
                                                        uint64_t& keys) const noexcept {
  const uint32_t count = count_;
  if (count == 0) {
    keys = 0;
    return true;
  }
  detail::KeyMemo& memo = memos[name_id_ % kKeyMemoSlots];
  // relaxed: the serial was set by this thread's or an earlier lookup in the table, ordered
  // for this thread by the acquire of the name's word (string_id).
  const uint32_t serial = strings_->serial.load(std::memory_order_relaxed);
  bool same = memo.count == count && memo.serial == serial;
#pragma GCC unroll 4
  for (uint32_t k = 0; k < kCompactAttrs && k < count; ++k) same &= memo.keys[k] == keys_[k];
  if (__builtin_expect(same, 1)) {
    keys = memo.ids;
    return true;
  }
  uint64_t ids = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint16_t id = detail::string_id_in(*strings_, keys_[i], 0);
    if (id == 0) return false;
    ids |= uint64_t{id} << (16 * i);
  }
  // The keys past count are null, as in the Span (compact_key): finish() compares all
  // kCompactAttrs of them (same_keys).
  for (uint32_t i = 0; i < kCompactAttrs; ++i) memo.keys[i] = i < count ? keys_[i] : nullptr;
  memo.ids = ids;
  memo.count = count;
  // The serial after the lookups: one of them may have emptied the table (a new attach).
  memo.serial = strings_->serial.load(std::memory_order_relaxed);
  keys = ids;
  return true;
}

void Span::end(detail::SpanData d) noexcept {
  d.end_at(d.tsc_ ? static_cast<int64_t>(read_tsc()) : now_ns());
}

void Span::end_at(detail::SpanData d, int64_t end) noexcept { d.end_at(end); }

void detail::SpanData::end_at(int64_t end) noexcept {
  if (inline_ != 0) {
    // Begun inline (Span::begin_inline), which leaves these unset: a literal name (at most
    // kStringMaxBytes), timed by the counter; attrs_ empty and packed until an attribute went
    // there (settle(), spilled_).
    name_len_ = static_cast<uint16_t>(strnlen(name_, kNameRawMax));
    tsc_ = true;
    if (spilled_ == 0) {
      packed_ = true;
      attrs_len_ = 0;
    }
    // Begun at a site (inline_ 2), which leaves name_id_ 0: the id is the site's word's, which
    // begin_inline found valid for this thread's ring. The word is filled once per attach
    // generation, and another segment is not attached while a Span is open (attach_segment),
    // so it still holds that id. acquire: as site_name_id's.
    if (inline_ == 2) name_id_ = static_cast<uint16_t>(site_->name.load(std::memory_order_acquire));
  }
  // begin() found or made the state, and t_self keeps it until the thread's key destructor
  // runs, which is after every Span of the thread has ended (pthread_exit unwinds them first);
  // a signal handler's Span begins and ends inside the handler.
  ThreadState& t = *t_self;
  store_depth(t, t.depth, t.depth - 1);
  // TSC ticks of two CPUs can differ by a few ticks on some hosts: never a negative duration.
  const uint64_t dur = end > start_ ? static_cast<uint64_t>(end - start_) : 0;
  const uint16_t flags = tsc_ ? kRecordTsc : 0;
  if (spilled_ == 0 && name_id_ != 0 && dur <= 0xffffffffu && depth_ <= 0xff) {
    guarded_write([&](RingWriter& ring) {
      // Inside the guard (busy): the thread's key memo is never used by one of its own signal
      // handlers meanwhile (a handler's record is refused before it gets here).
      uint64_t keys = 0;
      if (__builtin_expect(ring.compact_allowed() && key_ids(t.key_memo, keys), 1)) {
        // A SPANRING_SPAN span with keys: its site keeps them when it holds none yet.
        if (detail::SpanSite* const site = this->site(); site != nullptr && count_ != 0)
          detail::site_fill_keys(*site, keys_, count_, name_id_, keys);
        return ring.write_compact(static_cast<uint64_t>(start_), inv_, hid_, values_,
                                  static_cast<uint32_t>(dur),
                                  static_cast<uint16_t>(kRecordCompact | flags), name_id_, keys,
                                  static_cast<uint8_t>(depth_),
                                  static_cast<uint8_t>(count_ | negative_ << 4));
      }
      // A key without an id, or the first record after a drop (which carries the whole
      // sequence number): ordinary.
      spill();
      return ring.write(name_, name_len_, attrs_, attrs_len_, static_cast<uint64_t>(start_), dur,
                        inv_, hid_, depth_,
                        static_cast<uint16_t>(
                            flags | (packed_ && attrs_len_ != 0 ? kRecordPackedAttrs : 0)));
    });
  } else {
    spill();
    emit_checked(name_, name_len_, inv_, hid_, depth_, start_, static_cast<int64_t>(dur), attrs_,
                 attrs_len_,
                 static_cast<uint16_t>(flags | (packed_ && attrs_len_ != 0 ? kRecordPackedAttrs
                                                                           : 0)));
  }
  // After the record is published: a process killed in between reports the span both written
  // and open, which the drainer recognises (the last record has its ts and depth); lowering the
  // depth first would lose it silently.
  if (RingHeader* ring = t.ring.shared(); ring != nullptr && spanring_vfork_child == 0)
    ring->open_depth.store(depth_, std::memory_order_relaxed);
}

// The compact attributes become packed tokens (or text, past the packed limit), in order.
void detail::SpanData::spill() noexcept {
  if (spilled_ != 0) return;
  const uint32_t n = count_;
  spilled_ = 1;  // append_number's own spill() returns at once
  for (uint32_t i = 0; i < n; ++i) {
    const bool negative = (negative_ >> i & 1) != 0;
    const uint64_t magnitude =
        negative ? uint64_t{0} - static_cast<uint64_t>(static_cast<int32_t>(values_[i]))
                 : uint64_t{values_[i]};
    // A compact key is a literal of at most kStringMaxBytes bytes (span.h).
    append_number(std::string_view{keys_[i], strnlen(keys_[i], kStringMaxBytes)}, negative,
                  magnitude);
  }
}

detail::SpanData Span::add_number(detail::SpanData d, const char* key, size_t key_len,
                                  bool negative, uint64_t magnitude) noexcept {
  d.spill();
  d.append_number(std::string_view{key, key_len}, negative, magnitude);
  return d;
}

void detail::SpanData::append(std::string_view text) noexcept {
  // Keep at most kAttrsRawMax raw bytes: one byte past the encoded cap tells the drainer the
  // attributes went on, so it cuts them with `~` exactly as the [STRACE] spec says.
  const size_t room = kAttrsRawMax - attrs_len_;
  const size_t n = text.size() < room ? text.size() : room;
  std::memcpy(attrs_ + attrs_len_, text.data(), n);
  attrs_len_ = static_cast<uint16_t>(attrs_len_ + n);
}

// The packed tokens become the text they stand for, and the span goes on in text.
void detail::SpanData::unpack() noexcept {
  char packed[kAttrsPackedMax];
  std::memcpy(packed, attrs_, attrs_len_);
  // A list this Span packed is well-formed: unpack_attrs cannot fail here.
  const int32_t n = unpack_attrs(packed, attrs_len_, attrs_, kAttrsRawMax);
  attrs_len_ = static_cast<uint16_t>(n > 0 ? n : 0);
  packed_ = false;
}

// An integer attribute the inline attr() could not pack (its check assumes 8 value bytes): packed
// when the token still fits exactly, else as text after unpacking, cut at the limit.
void detail::SpanData::append_number(std::string_view key, bool negative,
                                     uint64_t magnitude) noexcept {
  spill();
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

detail::SpanData Span::append_uint(detail::SpanData d, std::string_view key,
                                   uint64_t value) noexcept {
  d.append_number(key, false, value);
  return d;
}

detail::SpanData Span::append_int(detail::SpanData d, std::string_view key,
                                  int64_t value) noexcept {
  // 0 - magnitude is well-defined for INT64_MIN.
  d.append_number(key, value < 0,
                  value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value));
  return d;
}

detail::SpanData Span::append_text(detail::SpanData d, std::string_view key,
                                   std::string_view value) noexcept {
  d.spill();
  if (d.packed_) d.unpack();
  if (d.attrs_len_ != 0) d.append(" ");
  d.append(key);
  d.append("=");
  d.append(value);
  return d;
}

}  // namespace spanring
