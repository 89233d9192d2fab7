// Spans named by string ids their caller interned (id_span.h): the Python package's record
// path. Begin and end take the steps Span::begin and Span::finish/end_at take (span.cpp,
// span.h), on the same thread state and RingWriter: the open-span note, the one-slot
// CompactRecord written under the thread's busy flag, and for anything else the ordinary record
// through span.cpp's guarded write (write_span_record).
#include "src/id_span.h"
#include "src/producer.h"
#include "src/string_table.h"

#include <cstring>

namespace spanring {
namespace detail {

uint16_t intern_string(const char* bytes, uint32_t len) noexcept {
  if (!enabled() || bytes == nullptr || len == 0 || len > kStringMaxBytes) return 0;
  return intern(g_process.strings, bytes, len, &g_process.header->strings_full);
}

void id_span_begin(IdSpan& s, uint16_t name_id) noexcept {
  s.active = 0;
  if (!enabled()) return;
  if (spanring_vfork_child) {
    // A vfork child must not touch its parent's ring or depth (it shares the parent's memory).
    // relaxed: a report counter.
    g_process.header->vfork_drops.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadState* const self = thread_state();
  if (__builtin_expect(self == nullptr, 0)) {
    // No state could be mapped for this thread: the span is dropped and counted.
    g_process.header->no_ring_drops.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ThreadState& t = *self;
  const uint32_t depth = t.depth;
  s.active = 1;
  s.depth = depth;
  s.inv = t.inv;
  s.hid = t.hid;
  s.name_id = name_id;
  const bool tsc = g_process.use_tsc;
  s.tsc = tsc ? 1 : 0;
  const int64_t start = tsc ? static_cast<int64_t>(read_tsc()) : now_ns();
  s.start = start;
  s.end = start;
  if (__builtin_expect(t.ring.shared() == nullptr, 0) && (t.ring.gate() & kGateBusy) == 0 &&
      t.no_ring_wait == 0) {
    // The thread's first record-to-be claims its ring now, as Span::begin does, so that this
    // span is described in the ring's open-span stack if the process dies before it ends.
    t.ring.gate_or(kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!claim_ring(t)) t.no_ring_wait = kNoRingRetry;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t.ring.gate_clear(kGateBusy);
  }
  RingHeader* const ring = t.ring.shared();
  if (ring != nullptr && depth < kOpenSpanMax) {
    OpenSpan& o = ring->open[depth];
    o.ts_ns = static_cast<uint64_t>(start);
    o.inv = s.inv;
    o.name_len = 0;  // an interned name: its id, no bytes
    o.flags = tsc ? kOpenTsc : 0;
    o.name_id = name_id;
  }
  // After the note's stores (as Span::begin_inline): a drainer reading a dead process' stack
  // never sees a depth whose note is not written.
  store_depth(t, depth, depth + 1);
  // relaxed: read by the drainer only once this process is dead.
  if (ring != nullptr) ring->open_depth.store(depth + 1, std::memory_order_relaxed);
}

bool id_span_end_compact(IdSpan& s, const uint32_t* values, uint64_t keys, uint32_t count,
                         uint32_t negative) noexcept {
  if (s.active == 0) return true;
  const int64_t end = s.tsc != 0 ? static_cast<int64_t>(read_tsc()) : now_ns();
  s.end = end;
  // id_span_begin found or made the state, and t_self keeps it until the thread's key
  // destructor runs (after the thread's last Python code).
  ThreadState* const t = t_self;
  // TSC ticks of two CPUs can differ by a few ticks on some hosts: never a negative duration.
  const uint64_t dur = end > s.start ? static_cast<uint64_t>(end - s.start) : 0;
  // The common case, as Span::finish writes it: a thread whose gate is open (a ring claimed and
  // timed by the counter: then s.tsc is 1 too; not busy, not a vfork child, no drop since the
  // last record).
  if (__builtin_expect(dur <= 0xffffffffu && s.depth <= 0xff && count <= kCompactAttrs &&
                           gate_open(*t),
                       1)) {
    // busy from here: a signal handler's record meanwhile is dropped and counted
    // (reentrant_drops, announced by release_busy). A drop since the ring's last record
    // (enter_busy false: the next record carries the whole sequence number) or a full ring
    // (whose drop the ordinary write counts): id_span_end_text.
    if (__builtin_expect(enter_busy(*t) && t->ring.room_for_compact(), 1)) {
      const uint32_t depth = s.depth;
      t->depth -= 1;
      uint64_t v[2];  // the values as the record's two words (put_compact)
      std::memcpy(v, values, sizeof v);
      RingHeader* const ring =
          t->ring.put_compact(static_cast<uint64_t>(s.start), s.inv, s.hid, v[0], v[1],
                              static_cast<uint32_t>(dur),
                              static_cast<uint16_t>(kRecordCompact |
                                                    (s.tsc != 0 ? kRecordTsc : 0)),
                              s.name_id, keys, static_cast<uint8_t>(depth),
                              static_cast<uint8_t>(count | (negative & 0xfu) << 4));
      // After the record is published (as Span::finish), with the header's pointer still in a
      // register. release: ordered after the head's release store; read by the drainer only
      // once this process is dead.
      ring->open_depth.store(depth, std::memory_order_release);
      release_open_busy(*t);
      return true;
    }
    release_busy(*t);
  }
  return false;
}

void id_span_end_text(IdSpan& s, const char* name, uint32_t name_len, const char* attrs,
                      uint32_t attrs_len) noexcept {
  if (s.active == 0) return;
  s.active = 0;
  // id_span_begin found or made the state; only a thread past its key destructor has none, and
  // then nothing of it may be touched.
  ThreadState* const self = t_self;
  if (__builtin_expect(!has_state(self), 0)) return;
  ThreadState& t = *self;
  store_depth(t, t.depth, t.depth - 1);
  const uint64_t dur = s.end > s.start ? static_cast<uint64_t>(s.end - s.start) : 0;
  write_span_record(name, name_len < kNameRawMax ? name_len : kNameRawMax, attrs,
                    attrs_len < kAttrsRawMax ? attrs_len : kAttrsRawMax, s.inv, s.hid, s.depth,
                    s.start, static_cast<int64_t>(dur),
                    static_cast<uint16_t>(s.tsc != 0 ? kRecordTsc : 0));
  // After the record is published (as Span::end_at). relaxed: read by the drainer only once
  // this process is dead.
  if (RingHeader* ring = t.ring.shared(); ring != nullptr && spanring_vfork_child == 0)
    ring->open_depth.store(s.depth, std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace spanring
