#include "format/binary_reader.h"

#include "format/block_frame.h"
#include "format/text_sink.h"
#include "format/tsc_clock.h"

#include "src/record_decode.h"

#include <spanring/segment_layout.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace spanring {


namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// The string definitions (event 7) read so far in the file: id -> raw bytes.
struct FileStrings {
  uint8_t len[kStringTableEntries] = {};  // 0: not defined
  char bytes[kStringTableEntries][kStringMaxBytes];
  bool resolve(uint32_t id, std::string_view& out, std::string& why) const {
    if (id == 0 || id >= kStringTableEntries || len[id] == 0) {
      why = "string id " + std::to_string(id) + " is not defined before its use in the file";
      return false;
    }
    out = std::string_view(bytes[id], len[id]);
    return true;
  }
  // resolve() without a message: false when `id` is not defined (the caller then decodes the
  // record the ordinary way, which says why).
  bool find(uint32_t id, std::string_view& out) const noexcept {
    if (id == 0 || id >= kStringTableEntries || len[id] == 0) return false;
    out = std::string_view(bytes[id], len[id]);
    return true;
  }
};

// Bytes allocated (zeroed) past the block payload buffer's capacity: the text line's 16-byte
// reads (format_span_plain) go at most 15 bytes past a record's payload.
constexpr size_t kPayloadSlack = 16;

// What the records of a run are, to its reader.
enum class RunShape : uint8_t {
  kWhole,    // every record frames and passes the decoder's own framing checks
  kDamaged,  // every record frames (the run can be walked), some fail the decoder's checks
  kBroken,   // a record does not frame: the block is malformed (check_run() says why)
};

// What the events of a file read so far carry across blocks, and the damage counted in them.
struct FileState {
  std::unique_ptr<FileStrings> strings;  // allocated at the first event 7
  // Version 4: the drainer's clock samples read so far (event 9), which convert the TSC times
  // of runs as the drainer would have converted them at this point of the file. Allocated at
  // the first event 9; a run with TSC times before any is damage (its records counted drops).
  std::unique_ptr<TscClock> clock;
  // The shape of each run of the block being read, in order, as its check found it: the
  // delivery of the same block (walk_events with a visitor, right after) takes them from here
  // rather than walk every run's records twice.
  std::vector<RunShape> shapes;
  size_t next_shape = 0;
  uint64_t damaged = 0;        // records of runs dropped as corrupt (delivered as drops)
  std::string first_damage;    // why, for the first of them
};

// The framing of the run event `body` (len bytes, checked: >= sizeof(RunBody)): its counts,
// and every record's slot count, flags and sequence number (what a reader needs to walk it).
// What can be wrong inside a record without breaking the walk (a NUL in a name, malformed
// packed attributes, an undefined string id) is found when it is delivered, and counted.
// The framing of a run's records, all at once and without a message (two 8-byte loads and a
// few compares a record; with the messages' machinery in the loop it was ~85 instructions a
// record of `convert`). A record frames when a reader can walk past it and knows its sequence
// number: a compact record (flags bit 4) has slot count 1, flags kRecordCompact (and kRecordTsc
// when `tsc`) and its sequence number's low bits; an ordinary one a slot count
// 1..kMaxRecordSlots within the run, flags within kRecordPackedAttrs (and kRecordTsc when
// `tsc`), and its sequence number. What the drainer does not check (binary version 4: it
// frames, docs/binary-format.md), the decoder's checks (check_compact_frame,
// check_ordinary_frame: lengths that give the slot count within their bounds, an attribute
// count 0..kCompactAttrs) make a record damaged, not the run broken.
RunShape run_shape(const char* slots, uint32_t nslots, uint32_t nrecords, uint64_t first_seq,
                   bool tsc) noexcept {
  constexpr uint32_t kAttrsNibbleOk = 0x11F;  // count 0..4, or the text bit with count 0
  static_assert(kCompactAttrs == 4 && kCompactAttrsText == 8);
  constexpr uint32_t kCompactHead = uint32_t{kRecordCompact} << 16 | 1u;  // flags, slots 1
  const uint32_t tsc_bit = tsc ? uint32_t{kRecordTsc} << 16 : 0;
  const uint32_t ordinary_flags = tsc ? (kRecordTsc | kRecordPackedAttrs) : kRecordPackedAttrs;
  // Walked by pointer up to the run's end, without a record count in the loop: every record
  // takes at least one slot, so the walk ends within nslots turns; a record whose slots run
  // past the end leaves `slot` beyond it (only its header, inside the run, was read), and a
  // wrong number of records leaves `seq` off first_seq + nrecords: both checked once, after the
  // loop.
  const char* slot = slots;
  const char* const end = slots + size_t{nslots} * kSlotBytes;
  uint64_t seq = first_seq;
  bool damaged = false;
  while (slot < end) {
    uint64_t w6;  // slots, flags, ...
    std::memcpy(&w6, slot + 48, sizeof w6);
    const auto head = static_cast<uint32_t>(w6);
    if (head & (uint32_t{kRecordCompact} << 16)) {
      uint32_t seq_lo;
      std::memcpy(&seq_lo, slot + offsetof(CompactRecord, seq_lo), sizeof seq_lo);
      const auto attrs = static_cast<uint8_t>(slot[offsetof(CompactRecord, attrs)]);
      if ((head & ~tsc_bit) != kCompactHead || seq_lo != static_cast<uint32_t>(seq))
        return RunShape::kBroken;
      damaged |= ((kAttrsNibbleOk >> (attrs & 0xFu)) & 1u) == 0;
      slot += kSlotBytes;
    } else {
      const uint32_t n = head & 0xFFFFu;
      const uint32_t flags = head >> 16;
      uint64_t rseq;
      std::memcpy(&rseq, slot + offsetof(RecordHeader, seq), sizeof rseq);
      if ((flags & ~ordinary_flags) != 0 || rseq != seq || n - 1 >= kMaxRecordSlots)
        return RunShape::kBroken;
      uint32_t lens;  // name_len, attrs_len
      std::memcpy(&lens, slot + offsetof(RecordHeader, name_len), sizeof lens);
      static_assert(offsetof(RecordHeader, attrs_len) == offsetof(RecordHeader, name_len) + 2);
      const uint32_t name_len = lens & 0xFFFFu;
      const uint32_t attrs_len = lens >> 16;
      const bool packed = (flags & kRecordPackedAttrs) != 0;
      damaged |= name_len - 1 >= kNameRawMax ||
                 attrs_len > (packed ? kAttrsPackedMax : kAttrsRawMax) ||
                 (packed && attrs_len == 0) || n != record_slots(name_len + attrs_len);
      slot += size_t{n} * kSlotBytes;
    }
    ++seq;
  }
  if (slot != end || seq != first_seq + nrecords) return RunShape::kBroken;
  return damaged ? RunShape::kDamaged : RunShape::kWhole;
}

// `fixed`: the run body's fixed part (RunBody, or RunBody4 from version 4 on, whose records may
// carry kRecordTsc: `tsc`). "" when the run can be walked (run_shape() is not kBroken), else why
// not: its counts, or the first record that does not frame.
std::string check_run(const char* body, size_t len, size_t fixed, bool tsc, RunShape& shape) {
  shape = RunShape::kBroken;
  RunBody b;
  std::memcpy(&b, body, sizeof b);
  if (b.slots == 0 || b.slots > kMaxRunSlots || len != fixed + size_t{b.slots} * kSlotBytes)
    return "run of " + std::to_string(b.slots) + " slots in an event of " + std::to_string(len) +
           " bytes (1.." + std::to_string(kMaxRunSlots) + " slots of " +
           std::to_string(kSlotBytes) + " bytes after a " + std::to_string(fixed) +
           "-byte body)";
  if (b.records == 0 || b.records > b.slots)
    return "run of " + std::to_string(b.slots) + " slots claims " + std::to_string(b.records) +
           " records";
  const char* slots = body + fixed;
  shape = run_shape(slots, b.slots, b.records, b.first_seq, tsc);
  if (shape != RunShape::kBroken) return {};
  const uint16_t compact_flags = tsc ? (kRecordCompact | kRecordTsc) : kRecordCompact;
  const uint16_t ordinary_flags = tsc ? (kRecordTsc | kRecordPackedAttrs) : kRecordPackedAttrs;
  uint32_t at = 0;
  uint32_t records = 0;
  for (; at < b.slots && records < b.records; ++records) {
    const uint64_t seq = b.first_seq + records;
    RecordHeader h;
    std::memcpy(&h, slots + size_t{at} * kSlotBytes, sizeof h);
    const RecordWhere where{"run record ", records, " at slot ", at};
    if ((h.flags & kRecordCompact) != 0) {
      CompactRecord c;
      std::memcpy(&c, &h, sizeof c);
      if (c.slots != 1) return where.str() + " claims " + std::to_string(c.slots) + " slots";
      if ((c.flags & ~compact_flags) != 0)
        return where.str() + " has bad flags " + std::to_string(c.flags) +
               (tsc ? "" : " (a version 3 run holds no TSC time)");
      if (c.seq_lo != static_cast<uint32_t>(seq))
        return where.str() + " has sequence low bits " + std::to_string(c.seq_lo) +
               ", expected " + std::to_string(static_cast<uint32_t>(seq)) + " (sequence " +
               std::to_string(seq) + ")";
    } else {
      if (h.slots == 0 || h.slots > kMaxRecordSlots || h.slots > b.slots - at)
        return where.str() + " claims " + std::to_string(h.slots) + " slots (" +
               std::to_string(b.slots - at) + " published)";
      if (h.seq != seq || (h.flags & ~ordinary_flags) != 0)
        return where.str() + " has sequence " + std::to_string(h.seq) + " (its place says " +
               std::to_string(seq) + ") or flags " + std::to_string(h.flags) +
               (tsc ? " (a run holds no marker)" : " (a run holds no marker and no TSC time)");
    }
    at += h.slots;
  }
  return "run of " + std::to_string(b.slots) + " slots and " + std::to_string(b.records) +
         " records holds " + std::to_string(records) + " records in " + std::to_string(at) +
         " slots";
}

// Delivers the records of a run whose framing check_run() accepted: each decoded exactly as the
// drainer decodes the ring (src/record_decode.h); a record that does not decode, or fails the
// decoder's framing checks (run_shape() kDamaged: then the run goes record by record), is
// delivered as one corrupt drop and counted in `st`. `fixed`: the body's fixed part (RunBody or
// RunBody4); with RunBody4, a record's TSC times are converted with the file's clock samples
// and the run's anchor as the drainer converts them (TscClock::span_ns), and with no clock
// sample read yet such a record is damage (a corrupt drop), as it cannot be placed in time.
// A run with a record the decoder's framing checks refuse (run_shape() kDamaged): record by
// record, each checked as the decoder checks it, then decoded alone, or delivered as a corrupt
// drop. Out of line (rare): the common path keeps one inlined decoder.
template <class Resolve, class OnSpan, class OnCorrupt>
[[gnu::noinline]] void deliver_damaged(const char* slots, const RunBody& b, bool tsc,
                                       Resolve& resolve, RecordCopy& rec, OnSpan& on_span,
                                       OnCorrupt& corrupt) {
  uint32_t at = 0;
  std::string why;
  for (uint32_t i = 0; i < b.records; ++i) {
    const uint64_t seq = b.first_seq + i;
    const char* const slot = slots + size_t{at} * kSlotBytes;
    RecordHeader h;
    std::memcpy(&h, slot, sizeof h);
    const RecordWhere where{"run record ", i, " at slot ", at};
    bool frames;
    if ((h.flags & kRecordCompact) != 0) {
      CompactRecord c;
      std::memcpy(&c, slot, sizeof c);
      frames = check_compact_frame(c, seq, tsc, where, why);
      at += 1;
    } else {
      frames = check_ordinary_frame(h, b.slots - at, seq, where, why);
      at += h.slots;  // framed: 1..kMaxRecordSlots within the run (check_run)
    }
    if (frames) decode_run(slot, 1, seq, resolve, rec, on_span, corrupt);
    else corrupt(seq, why);
  }
}

// The records of a run whose records all frame and pass the decoder's framing checks
// (run_shape() kWhole) for a visitor with text lines (EventVisitor::text_lines): each record
// formatted straight from the run's bytes by the text drainer's direct line (format_span_plain
// for an ordinary record, whose payload is read in place; format_span_compact for a compact
// one, its strings resolved through the file's definitions), its TSC times converted by `spans`
// as on_span converts them. A record the line does not copy as it is (a byte to escape, a NUL
// in the name, malformed packed attributes, a string id not defined, TSC times before any clock
// event) is decoded as decode_run decodes it, with the same messages, and delivered by on_span
// or counted by `corrupt`. The run's bytes are this reader's own copy, so reading a record
// again after the line refused it reads the same bytes. The line's 16-byte reads go at most 15
// bytes past a record's payload, so past the run's end only into the payload buffer's
// kPayloadSlack (read_binary_trace).
// deliver_direct's way for a record its line did not take: decoded as decode_run decodes it,
// with the same messages, and delivered by on_span or counted by `corrupt`. Out of line (rare):
// the line's loop keeps its registers.
template <class OnSpan, class OnCorrupt>
[[gnu::noinline]] void deliver_decoded(const char* slot, uint32_t i, uint32_t at, uint64_t seq,
                                       const FileStrings& strings, RecordCopy& rec,
                                       OnSpan& on_span, OnCorrupt& corrupt) {
  auto resolve = [&strings](uint32_t id, std::string_view& out, std::string& w) {
    return strings.resolve(id, out, w);
  };
  std::string why;
  std::memcpy(&rec.header, slot, sizeof rec.header);
  bool ok;
  if ((rec.header.flags & kRecordCompact) != 0) {
    CompactRecord c;
    std::memcpy(&c, slot, sizeof c);
    ok = decode_compact(c, seq, resolve, rec, RecordWhere{"run record ", i, " at slot ", at}, why);
  } else {
    copy_ordinary_payload(rec, reinterpret_cast<const std::byte*>(slot) + kSlotBytes);
    ok = finish_ordinary(rec, RecordWhere{"run record ", i, " at slot ", at}, why);
  }
  if (ok) on_span(static_cast<const RecordCopy&>(rec));
  else corrupt(seq, why);
}

template <class OnSpan, class OnCorrupt>
void deliver_direct(const char* slots, const RunBody& b, const TscClock::Spans& spans,
                    bool have_clock, const FileStrings& strings, TextLines& lines,
                    RecordCopy& rec, OnSpan& on_span, OnCorrupt& corrupt) {
  // The lines go into a window of the output, asked for once per kWindow bytes of lines and
  // committed when it is left (not a room() and a commit() per line: ~10 instructions a line):
  // before a record that takes span() or a drop (which write through the output themselves)
  // and at the run's end. `p` is where the next line goes; a line fits while p <= last.
  constexpr size_t kWindow = 32u << 10;
  static_assert(kWindow >= 2 * kPlainLineRoom);
  char* base = lines.out.room(kWindow);
  char* p = base;
  char* last = base + (kWindow - kPlainLineRoom);
  auto leave = [&] { lines.out.commit(static_cast<size_t>(p - base)); };
  auto enter = [&] {
    base = p = lines.out.room(kWindow);
    last = base + (kWindow - kPlainLineRoom);
  };
  const char* slot = slots;  // the record's first slot (framed: each within the run)
  for (uint32_t i = 0; i < b.records; ++i) {
    RecordHeader h;
    std::memcpy(&h, slot, sizeof h);
    const bool tsc = (h.flags & kRecordTsc) != 0;
    if (__builtin_expect(p > last, 0)) {
      leave();
      enter();
    }
    size_t n = 0;
    size_t step;  // the record's slots, in bytes
    if ((h.flags & kRecordCompact) != 0) {
      step = kSlotBytes;
      CompactRecord c;
      std::memcpy(&c, slot, sizeof c);
      uint16_t ids[1 + kCompactAttrs];
      std::string_view text[1 + kCompactAttrs];
      const uint32_t k = compact_string_ids(c, ids);
      bool resolved = have_clock || !tsc;
      for (uint32_t j = 0; j < k && resolved; ++j) resolved = strings.find(ids[j], text[j]);
      if (resolved) {
        h.ts_ns = c.ts_ns;
        h.dur_ns = c.dur_ns;
        if (tsc) {
          const TscClock::Interval ns = spans(c.ts_ns, c.dur_ns);
          h.ts_ns = ns.start_ns;
          h.dur_ns = ns.dur_ns;
        }
        h.inv = c.inv;
        h.hid = c.hid;
        h.depth = c.depth;
        h.seq = b.first_seq + i;
        h.flags = 0;
        h.slots = 1;
        n = lines.sink.span_compact(p, b.pid, b.tid, h, c, text);
      }
    } else {
      step = size_t{h.slots} * kSlotBytes;  // framed: 1..kMaxRecordSlots within the run
      if (have_clock || !tsc) {
        if (tsc) {
          const TscClock::Interval ns = spans(h.ts_ns, h.dur_ns);
          h.ts_ns = ns.start_ns;
          h.dur_ns = ns.dur_ns;  // the line reads no flag but kRecordPackedAttrs
        }
        n = lines.sink.span_plain(p, b.pid, b.tid, h, slot + offsetof(RecordHeader, payload));
      }
    }
    if (__builtin_expect(n == 0, 0)) {
      leave();
      deliver_decoded(slot, i, static_cast<uint32_t>((slot - slots) / kSlotBytes),
                      b.first_seq + i, strings, rec, on_span, corrupt);
      enter();
    }
    p += n;
    slot += step;
  }
  leave();
}

// A version 3 run (no TSC time: check_run refused any), out of line for the same reason.
template <class Resolve, class OnCorrupt>
[[gnu::noinline]] void deliver_v3(const char* slots, const RunBody& b, EventVisitor& v,
                                  Resolve& resolve, RecordCopy& rec, OnCorrupt& corrupt) {
  auto on_span = [&](const RecordCopy& r) { v.span(SpanEvent::of(b.pid, b.tid, r)); };
  decode_run(slots, b.records, b.first_seq, resolve, rec, on_span, corrupt);
}

// Delivers the records of a run whose framing check_run() accepted: each decoded exactly as the
// drainer decodes the ring (src/record_decode.h); a record that does not decode, or fails the
// decoder's framing checks (`shape` kDamaged), is delivered as one corrupt drop and counted in
// `st`. `fixed`: the body's fixed part (RunBody or RunBody4); with RunBody4, a record's TSC
// times are converted with the file's clock samples and the run's anchor as the drainer
// converts them (TscClock::span_ns), and with no clock sample read yet such a record is damage
// (a corrupt drop), as it cannot be placed in time.
[[gnu::flatten]] void deliver_run(const char* body, size_t fixed, RunShape shape, EventVisitor& v,
                 FileState& st, RecordCopy& rec) {
  RunBody b;
  std::memcpy(&b, body, sizeof b);
  const bool v4 = fixed == sizeof(RunBody4);
  static const FileStrings kNone{};
  const FileStrings& strings = st.strings ? *st.strings : kNone;
  auto resolve = [&strings](uint32_t id, std::string_view& out, std::string& w) {
    return strings.resolve(id, out, w);
  };
  auto corrupt = [&](uint64_t seq, const std::string& why) {
    if (st.damaged++ == 0) st.first_damage = why;
    v.drops(DropsEvent{b.pid, b.tid, 1, seq, seq, DropReason::kCorrupt});
  };
  const char* const slots = body + fixed;
  TextLines* const lines = shape == RunShape::kWhole ? v.text_lines() : nullptr;
  if (!v4) {
    if (lines != nullptr) {
      auto on_span = [&](const RecordCopy& r) { v.span(SpanEvent::of(b.pid, b.tid, r)); };
      static const TscClock kNoClock{TscClock::Replay{}};
      const TscClock::Spans spans(kNoClock, TscClock::Pair{0, 0});  // a v3 run has no TSC
      deliver_direct(slots, b, spans, false, strings, *lines, rec, on_span, corrupt);
    } else if (shape == RunShape::kWhole) {
      deliver_v3(slots, b, v, resolve, rec, corrupt);
    } else {
      auto on_span = [&](const RecordCopy& r) { v.span(SpanEvent::of(b.pid, b.tid, r)); };
      deliver_damaged(slots, b, false, resolve, rec, on_span, corrupt);
    }
    return;
  }
  RunBody4 b4;
  std::memcpy(&b4, body, sizeof b4);
  static const TscClock kNoClock{TscClock::Replay{}};
  const TscClock::Spans spans(st.clock ? *st.clock : kNoClock,
                              TscClock::Pair{b4.anchor_tsc, b4.anchor_ns});
  const bool have_clock = st.clock != nullptr;
  auto on_span = [&](const RecordCopy& decoded) {
    // `decoded` is `rec`, this reader's own record, which decode_run passes back as const: its
    // times are converted in place before delivery.
    RecordCopy& r = const_cast<RecordCopy&>(decoded);
    RecordHeader& h = r.header;
    if (h.flags & kRecordTsc) {
      if (__builtin_expect(!have_clock, 0)) {
        corrupt(h.seq, "run record " + std::to_string(h.seq - b.first_seq) +
                           " carries TSC times, and no clock event precedes it");
        return;
      }
      const TscClock::Interval ns = spans(h.ts_ns, h.dur_ns);
      h.ts_ns = ns.start_ns;
      h.dur_ns = ns.dur_ns;
      h.flags &= static_cast<uint16_t>(~kRecordTsc);
    }
    v.span(SpanEvent::of(b.pid, b.tid, r));
  };
  if (shape != RunShape::kWhole) {
    deliver_damaged(slots, b, true, resolve, rec, on_span, corrupt);
    return;
  }
  if (lines != nullptr) {
    deliver_direct(slots, b, spans, have_clock, strings, *lines, rec, on_span, corrupt);
    return;
  }
  decode_run(slots, b.records, b.first_seq, resolve, rec, on_span, corrupt);
}

// Checks (and, with a visitor, delivers) the events of one payload. Returns "" when every event
// is well formed; else why, with *bad_at = the offset in the payload of the bad event.
std::string walk_events(const char* p, size_t n, EventVisitor* v, size_t* bad_at,
                        uint64_t* events, uint32_t version, FileState& st) {
  // Version 2 adds drop reasons kMaxSize and kOverwritten (binary_format.h).
  const uint8_t max_reason = static_cast<uint8_t>(
      version >= 2 ? DropReason::kOverwritten : DropReason::kReentrant);
  size_t at = 0;
  uint64_t count = 0;
  RecordCopy rec;
  if (v == nullptr) st.shapes.clear();
  st.next_shape = 0;
  while (at < n) {
    *bad_at = at;
    if (n - at < sizeof(EventHeader))
      return "the block's last " + std::to_string(n - at) +
             " bytes are too few for an event header (4 bytes)";
    EventHeader eh;
    std::memcpy(&eh, p + at, sizeof eh);
    const size_t body_at = at + sizeof eh;
    if (eh.body_bytes > n - body_at)
      return "an event of " + std::to_string(eh.body_bytes) + " bytes runs past the end of its "
             "block (" + std::to_string(n - body_at) + " bytes left)";
    if (eh.flags != 0) return "event flags " + std::to_string(eh.flags) + " (must be 0)";
    const char* body = p + body_at;
    const size_t len = eh.body_bytes;
    auto need = [&](size_t fixed, size_t var, const char* what) -> std::string {
      if (len != fixed + var)
        return std::string(what) + " event of " + std::to_string(len) + " bytes, expected " +
               std::to_string(fixed) + " + " + std::to_string(var);
      return {};
    };
    std::string why;
    switch (static_cast<EventType>(eh.type)) {
      case EventType::kProcess: {
        ProcessBody b;
        if (len < sizeof b) return need(sizeof b, 0, "process");
        std::memcpy(&b, body, sizeof b);
        if (b.cmdline_len > kMaxCmdlineBytes)
          return "process command line of " + std::to_string(b.cmdline_len) +
                 " bytes (at most " + std::to_string(kMaxCmdlineBytes) + ")";
        if (!(why = need(sizeof b, b.cmdline_len, "process")).empty()) return why;
        if (v) v->process(ProcessEvent{b.pid, b.tid, b.mono_ns, b.wall_ns,
                                       std::string_view(body + sizeof b, b.cmdline_len)});
        break;
      }
      case EventType::kThread: {
        ThreadBody b;
        if (len < sizeof b) return need(sizeof b, 0, "thread");
        std::memcpy(&b, body, sizeof b);
        if (b.name_len > kMaxThreadNameBytes)
          return "thread name of " + std::to_string(b.name_len) + " bytes (at most " +
                 std::to_string(kMaxThreadNameBytes) + ")";
        if (!(why = need(sizeof b, b.name_len, "thread")).empty()) return why;
        if (v) v->thread(ThreadEvent{b.pid, b.tid, std::string_view(body + sizeof b, b.name_len)});
        break;
      }
      case EventType::kSpan: {
        SpanBody b;
        if (len < sizeof b) return need(sizeof b, 0, "span");
        std::memcpy(&b, body, sizeof b);
        if (b.name_len == 0 || b.name_len > kNameRawMax)
          return "span name of " + std::to_string(b.name_len) + " bytes (must be 1.." +
                 std::to_string(kNameRawMax) + ")";
        if (b.attrs_len > kAttrsRawMax)
          return "span attributes of " + std::to_string(b.attrs_len) + " bytes (at most " +
                 std::to_string(kAttrsRawMax) + ")";
        // Compared here, not through need(): a string per span was ~10% of the walk.
        if (len != sizeof b + b.name_len + b.attrs_len)
          return need(sizeof b, size_t{b.name_len} + b.attrs_len, "span");
        if (v) {
          std::memset(&rec.header, 0, sizeof rec.header);
          rec.header.seq = b.seq;
          rec.header.ts_ns = b.ts_ns;
          rec.header.dur_ns = b.dur_ns;
          rec.header.inv = b.inv;
          rec.header.hid = b.hid;
          rec.header.depth = b.depth;
          rec.header.name_len = b.name_len;
          rec.header.attrs_len = b.attrs_len;
          rec.header.slots = static_cast<uint16_t>(record_slots(b.name_len + b.attrs_len));
          std::memcpy(rec.payload, body + sizeof b, size_t{b.name_len} + b.attrs_len);
          v->span(SpanEvent::of(b.pid, b.tid, rec));
        }
        break;
      }
      case EventType::kDrops: {
        DropsBody b;
        if (!(why = need(sizeof b, 0, "drops")).empty()) return why;
        std::memcpy(&b, body, sizeof b);
        if (b.reason < static_cast<uint8_t>(DropReason::kRingFull) ||
            b.reason > max_reason)
          return "drop reason " + std::to_string(b.reason) + " (version " +
                 std::to_string(version) + " has 1.." + std::to_string(max_reason) + ")";
        if (b.last_seq < b.first_seq)
          return "drop range " + std::to_string(b.first_seq) + ".." + std::to_string(b.last_seq) +
                 " ends before it starts";
        if (v) v->drops(DropsEvent{b.pid, b.tid, b.dropped, b.first_seq, b.last_seq,
                                   static_cast<DropReason>(b.reason)});
        break;
      }
      case EventType::kUnfinished: {
        UnfinishedBody b;
        if (len < sizeof b) return need(sizeof b, 0, "unfinished");
        std::memcpy(&b, body, sizeof b);
        if (b.name_len > kOpenNameBytes)
          return "unfinished span name of " + std::to_string(b.name_len) + " bytes (at most " +
                 std::to_string(kOpenNameBytes) + ")";
        if (b.name_cut > 1) return "unfinished span name_cut " + std::to_string(b.name_cut);
        if (!(why = need(sizeof b, b.name_len, "unfinished")).empty()) return why;
        if (v) v->unfinished(UnfinishedEvent{b.pid, b.tid, b.inv, b.depth, b.ts_ns,
                                             std::string_view(body + sizeof b, b.name_len),
                                             b.name_cut != 0, {}});
        break;
      }
      case EventType::kUndescribed: {
        UndescribedBody b;
        if (!(why = need(sizeof b, 0, "undescribed")).empty()) return why;
        std::memcpy(&b, body, sizeof b);
        if (v) v->undescribed(UndescribedEvent{b.pid, b.tid, b.count});
        break;
      }
      case EventType::kString: {
        if (version < 3) return "string event in a version " + std::to_string(version) + " file";
        StringBody b;
        if (len < sizeof b) return need(sizeof b, 0, "string");
        std::memcpy(&b, body, sizeof b);
        if (b.id == 0 || b.id >= kStringTableEntries || b.len == 0 || b.len > kStringMaxBytes)
          return "string id " + std::to_string(b.id) + " of " + std::to_string(b.len) +
                 " bytes (ids 1.." + std::to_string(kStringTableEntries - 1) + ", 1.." +
                 std::to_string(kStringMaxBytes) + " bytes)";
        if (!(why = need(sizeof b, b.len, "string")).empty()) return why;
        if (std::memchr(body + sizeof b, 0, b.len) != nullptr)
          return "string id " + std::to_string(b.id) + " holds a NUL byte";
        if (v) {
          if (!st.strings) st.strings = std::make_unique<FileStrings>();
          st.strings->len[b.id] = static_cast<uint8_t>(b.len);
          std::memcpy(st.strings->bytes[b.id], body + sizeof b, b.len);
        }
        break;
      }
      case EventType::kRun: {
        if (version < 3) return "run event in a version " + std::to_string(version) + " file";
        const size_t fixed = version >= 4 ? sizeof(RunBody4) : sizeof(RunBody);
        if (len < fixed) return need(fixed, 0, "run");
        RunShape shape;
        if (!v) {
          if (!(why = check_run(body, len, fixed, version >= 4, shape)).empty()) return why;
          st.shapes.push_back(shape);
        } else {
          // The check of this block found it; a run it did not see (never: the same payload)
          // is walked again.
          if (st.next_shape < st.shapes.size()) {
            shape = st.shapes[st.next_shape++];
          } else {
            RunBody b;
            std::memcpy(&b, body, sizeof b);
            shape = run_shape(body + fixed, b.slots, b.records, b.first_seq, version >= 4);
          }
          deliver_run(body, fixed, shape, *v, st, rec);
        }
        break;
      }
      case EventType::kClock: {
        if (version < 4) return "clock event in a version " + std::to_string(version) + " file";
        ClockBody b;
        if (len < sizeof b) return need(sizeof b, 0, "clock");
        std::memcpy(&b, body, sizeof b);
        if (b.count > kMaxClockSamplesPerEvent || b.reset > 1 || b.reserved[0] != 0 ||
            b.reserved[1] != 0 || b.reserved[2] != 0)
          return "clock event of " + std::to_string(b.count) + " samples, reset " +
                 std::to_string(b.reset) + " (at most " +
                 std::to_string(kMaxClockSamplesPerEvent) + " samples, reset 0 or 1, 0 after)";
        if (!(why = need(sizeof b, size_t{b.count} * sizeof(ClockSample), "clock")).empty())
          return why;
        if (v) {
          // Replayed through add(), as the drainer took them: a sample that does not rise is
          // ignored here as it was there (a hostile file gets a clock of its own making, never
          // a crash).
          if (!st.clock) st.clock = std::make_unique<TscClock>(TscClock::Replay{});
          if (b.reset) st.clock->clear();
          for (uint32_t i = 0; i < b.count; ++i) {
            ClockSample c;
            std::memcpy(&c, body + sizeof b + size_t{i} * sizeof c, sizeof c);
            st.clock->add(TscClock::Pair{c.tsc, c.ns});
          }
        }
        break;
      }
      default:
        return "unknown event type " + std::to_string(eh.type) + " (version " +
               std::to_string(version) + " has 1.." +
               (version >= 4 ? "9" : version >= 3 ? "8" : "6") + ")";
    }
    at = body_at + len;
    ++count;
  }
  *events = count;
  return {};
}

}  // namespace

bool is_binary_trace(std::string_view first_bytes) noexcept {
  return first_bytes.size() >= sizeof kTraceMagic &&
         std::memcmp(first_bytes.data(), kTraceMagic, sizeof kTraceMagic) == 0;
}

struct BinaryCarry::State {
  FileState file;
};
BinaryCarry::BinaryCarry() : state(std::make_unique<State>()) {}
BinaryCarry::~BinaryCarry() = default;
void BinaryCarry::reset() { state = std::make_unique<State>(); }

ReadResult read_binary_trace(TraceInput& in, EventVisitor& visitor, uint64_t* last_block_seq,
                             BinaryCarry* carry) {
  ReadResult r;
  r.format = "spanring binary trace";  // the version is added once the file header is read
  if (last_block_seq) *last_block_seq = UINT64_MAX;
  const uint64_t start = in.offset();
  auto at = [&](uint64_t off) { return "byte " + std::to_string(off); };
  std::function<void()> before_done;
  auto done = [&](ReadResult::Status s, uint64_t where, std::string msg) {
    if (before_done) before_done();
    r.status = s;
    r.error_offset = where;
    r.message = std::move(msg);
    r.bytes_read = in.offset() - start;
    return r;
  };

  // ---- file header
  FileHeader fh{};
  const size_t got = in.read(reinterpret_cast<char*>(&fh), sizeof fh);
  const size_t magic_got = std::min(got, sizeof kTraceMagic);
  if (got == 0 || std::memcmp(fh.magic, kTraceMagic, magic_got) != 0)
    return done(ReadResult::Status::kNotATrace, 0,
                "it does not start with the spanring binary magic \\x89SPRTRC\\n (it starts "
                "with \"" + printable_prefix(std::string_view(fh.magic, magic_got), 8) + "\")");
  if (got < sizeof fh)
    return done(ReadResult::Status::kCut, got,
                "the file is cut at " + at(got) + ", inside its " +
                    std::to_string(kFileHeaderBytes) + "-byte file header: it holds no block");
  if (fh.version < kOldestTraceVersion || fh.version > kTraceVersion)
    return done(ReadResult::Status::kCorrupt, offsetof(FileHeader, version),
                at(offsetof(FileHeader, version)) + ": unsupported format version " +
                    std::to_string(fh.version) + " (this spanring reads versions " +
                    std::to_string(kOldestTraceVersion) + ".." + std::to_string(kTraceVersion) +
                    ")");
  r.format = "spanring binary trace v" + std::to_string(fh.version);
  if (fh.header_bytes < kFileHeaderBytes || fh.header_bytes > kMaxFileHeaderBytes)
    return done(ReadResult::Status::kCorrupt, offsetof(FileHeader, header_bytes),
                at(offsetof(FileHeader, header_bytes)) + ": file header size " +
                    std::to_string(fh.header_bytes) + " (must be " +
                    std::to_string(kFileHeaderBytes) + ".." +
                    std::to_string(kMaxFileHeaderBytes) + ")");
  if (fh.header_bytes > kFileHeaderBytes) {
    char skip[kMaxFileHeaderBytes];
    const size_t want = fh.header_bytes - kFileHeaderBytes;
    if (in.read(skip, want) < want)
      return done(ReadResult::Status::kCut, in.offset() - start,
                  "the file is cut at " + at(in.offset() - start) + ", inside its " +
                      std::to_string(fh.header_bytes) + "-byte file header: it holds no block");
  }
  r.good_bytes = in.offset() - start;

  // ---- blocks
  FileState own;
  FileState& st = carry != nullptr ? carry->state->file : own;
  st.damaged = 0;  // counted per call; the definitions carry over
  // Said once the file is read, however it ends.
  auto damage_note = [&] {
    if (st.damaged != 0)
      r.notes.push_back(std::to_string(st.damaged) + " record" + (st.damaged == 1 ? "" : "s") +
                        " of runs could not be decoded and were read as corrupt drops (the "
                        "first: " + st.first_damage + ")");
  };
  before_done = damage_note;
  // The block payload buffer: grows, never shrinks, and is never zero-filled (a block's bytes
  // are read into it before anything looks at them). A zero-filling vector cost a store per
  // byte of the largest block, which grows with the file: ~20 instructions per record of
  // `convert` (callgrind).
  // kPayloadSlack bytes past its capacity: the direct line's 16-byte reads past a run's last
  // record (deliver_direct) stay inside the allocation.
  std::unique_ptr<char[]> payload;
  size_t payload_cap = 0;
  bool have_seq = false;
  uint64_t prev_seq = 0;
  auto complete_note = [&] {
    return " (the " + std::to_string(r.units) + " complete block" + (r.units == 1 ? "" : "s") +
           " before " + at(r.good_bytes) + " were read)";
  };
  for (;;) {
    const uint64_t block_at = in.offset() - start;
    BlockHeader bh{};
    const size_t hgot = in.read(reinterpret_cast<char*>(&bh), sizeof bh);
    if (hgot == 0) break;
    if (hgot < sizeof bh)
      return done(ReadResult::Status::kCut, block_at + hgot,
                  "the file is cut at " + at(block_at + hgot) + ", inside the header of the "
                  "block starting at " + at(block_at) + " (" + std::to_string(hgot) + " of " +
                  std::to_string(kBlockHeaderBytes) + " bytes)" + complete_note());
    const BlockCheck check = check_block_header(bh);
    if (check == BlockCheck::kBadMagic)
      return done(ReadResult::Status::kCorrupt, block_at,
                  at(block_at) + ": bad block magic " + hex32(bh.magic) + " (expected " +
                      hex32(kBlockMagic) + ", \"SBLK\"): the file is corrupt from here on" +
                      complete_note());
    if (check == BlockCheck::kBadHeaderCrc)
      return done(ReadResult::Status::kCorrupt, block_at,
                  at(block_at) + ": block header checksum mismatch (stored " +
                      hex32(bh.header_crc) + ", computed " + hex32(block_header_crc(bh)) +
                      "): the header of the block starting there is corrupt" + complete_note());
    if (check == BlockCheck::kTooLong)
      return done(ReadResult::Status::kCorrupt, block_at + offsetof(BlockHeader, payload_bytes),
                  at(block_at + offsetof(BlockHeader, payload_bytes)) + ": the block at " +
                      at(block_at) + " claims a length of " + std::to_string(bh.payload_bytes) +
                      " bytes, more than the limit of " +
                      std::to_string(kMaxBlockPayloadBytes) + complete_note());
    if (have_seq && bh.seq <= prev_seq)
      return done(ReadResult::Status::kCorrupt, block_at + offsetof(BlockHeader, seq),
                  at(block_at) + ": block sequence number " + std::to_string(bh.seq) +
                      " after " + std::to_string(prev_seq) +
                      ": blocks out of order (two files concatenated?)" + complete_note());
    // Read the payload in steps, so that a length near the limit in a short file does not
    // make the reader allocate the whole limit before it finds the end.
    size_t have = 0;
    while (have < bh.payload_bytes) {
      const size_t step = std::min<size_t>(bh.payload_bytes - have, 1u << 20);
      if (payload_cap < have + step) {
        auto grown = std::make_unique_for_overwrite<char[]>(have + step + kPayloadSlack);
        if (have != 0) std::memcpy(grown.get(), payload.get(), have);
        std::memset(grown.get() + have + step, 0, kPayloadSlack);  // read, never used
        payload = std::move(grown);
        payload_cap = have + step;
      }
      const size_t k = in.read(payload.get() + have, step);
      have += k;
      if (k < step) break;
    }
    if (have < bh.payload_bytes) {
      const uint64_t end = block_at + kBlockHeaderBytes + have;
      return done(ReadResult::Status::kCut, end,
                  "the file is cut at " + at(end) + ", inside block " + std::to_string(bh.seq) +
                      " that starts at " + at(block_at) + " (it needs " +
                      std::to_string(kBlockHeaderBytes + uint64_t{bh.payload_bytes}) +
                      " bytes, " + std::to_string(end - block_at) + " are there)" +
                      complete_note());
    }
    const uint32_t pcrc = block_payload_crc(payload.get(), bh.payload_bytes);
    if (pcrc != bh.payload_crc)
      return done(ReadResult::Status::kCorrupt, block_at + kBlockHeaderBytes,
                  "block " + std::to_string(bh.seq) + " at " + at(block_at) +
                      ": payload checksum mismatch (stored " + hex32(bh.payload_crc) +
                      ", computed " + hex32(pcrc) + "): bytes " +
                      std::to_string(block_at + kBlockHeaderBytes) + ".." +
                      std::to_string(block_at + kBlockHeaderBytes + bh.payload_bytes - 1) +
                      " are corrupt" + complete_note());
    // Check every event before delivering any: a bad block contributes nothing.
    size_t bad_at = 0;
    uint64_t events = 0;
    const std::string why = walk_events(payload.get(), bh.payload_bytes, nullptr, &bad_at,
                                        &events, fh.version, st);
    if (!why.empty()) {
      const uint64_t where = block_at + kBlockHeaderBytes + bad_at;
      return done(ReadResult::Status::kCorrupt, where,
                  at(where) + " (block " + std::to_string(bh.seq) + " at " + at(block_at) +
                      "): malformed event: " + why + complete_note());
    }
    if (have_seq && bh.seq != prev_seq + 1)
      r.notes.push_back("blocks " + std::to_string(prev_seq + 1) + ".." +
                        std::to_string(bh.seq - 1) + " are missing before " + at(block_at) +
                        " (a write the drainer reported as failed; their records were counted "
                        "as unwritten)");
    walk_events(payload.get(), bh.payload_bytes, &visitor, &bad_at, &events, fh.version, st);
    have_seq = true;
    prev_seq = bh.seq;
    if (last_block_seq) *last_block_seq = bh.seq;
    ++r.units;
    r.events += events;
    r.good_bytes = in.offset() - start;
  }
  damage_note();
  r.bytes_read = in.offset() - start;
  return r;
}

}  // namespace spanring
