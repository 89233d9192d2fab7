// spanring shared-memory segment layout, version 5.
//
// One named POSIX shared-memory object per traced job. It is created and sized once by the
// drainer (`spanring run` / `spanring drain --create`), then opened by every traced process
// through the name in SPANRING_SEGMENT. Nothing in it is a pointer: every location is an offset
// from the start of the segment, and the drainer bounds-checks every offset and counter it reads
// (the producer side is untrusted from the drainer's point of view).
//
//   offset 0                        SegmentHeader           (kSegmentHeaderBytes)
//   header.rings_offset             RingHeader[ring_count]  (kRingHeaderBytes each)
//   header.journal_offset           JournalEntry[ring_count] (the drainer's commit journal)
//   header.strings_offset           StringEntry[string_entries] (the string table)
//   header.slots_offset             slots of ring 0, ring 1, ...  (ring_capacity * kSlotBytes each)
//   header.segment_bytes            end
//
// Who writes what:
//   SegmentHeader   the creator, once, before publishing `magic` (release); afterwards only the
//                   counters marked "any producer" and the drainer's fields.
//   RingHeader      line 0 (ownership): the claiming producer thread while state == kClaiming,
//                   the drainer when it frees the ring; line 1 (head, drops, open_depth) and the
//                   open-span stack: the owning producer thread only; line 2 (tail and the
//                   drainer's resume point): the drainer only.
//   JournalEntry    the drainer only.
//   StringEntry     any producer, once per entry: the one whose CAS takes it from kStringEmpty
//                   (StringEntry says how); nobody afterwards. The drainer only reads.
//   slots           the owning producer, only in [head, tail + capacity); the drainer reads only
//                   [tail, head).
//
// Ring state machine (RingHeader::state):
//
//      kFree --CAS by a producer thread--> kClaiming --producer fills owner fields--> kActive
//        ^                                                                               |
//        |                    thread exit (pthread key destructor) ----------------------+
//        |                                                                               v
//        +--- drainer, once head == tail and the records are written ---------- kReleased
//        +--- drainer, once the owner process is dead (pid + start time) and the ring drained
//   kQuarantined: set by the drainer when the ring's header or records fail validation; the ring
//                 is never read or reused again in this segment's life.
//
// A zero-filled ring header reads as kFree with head == tail == 0, so a fresh segment needs no
// per-ring initialisation beyond the creator's zero fill.
//
// Records: a record is 1 to kMaxRecordSlots consecutive 64-byte slots. The first slot is a
// RecordHeader; the raw (not yet encoded) name bytes followed by the raw attribute bytes start in
// its `payload` and continue through the following slots, wrapping at the end of the ring like
// any other slot. Encoding and truncation to the [STRACE] caps happen in the drainer; the
// producer only bounds how many raw bytes it copies (kNameRawMax, kAttrsRawMax).
//
// Compact records (kRecordCompact, version 5): the common span (a stable name, up to
// kCompactAttrs integer attributes with stable keys and 32-bit values) fits one slot: its name
// and keys are ids into the segment's string table (StringEntry), registered once, and the
// slot is a CompactRecord instead of a RecordHeader. Both share `slots` and `flags` at the same
// offsets, which is how the drainer tells them apart.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace spanring {

// "SPANRING" read as a little-endian u64: the first 8 bytes of a segment.
inline constexpr uint64_t kSegmentMagic = 0x474e49524e415053ULL;
// Bumped whenever any struct in this file changes shape or meaning. A process that finds another
// version refuses the segment; it never guesses.
// Version 2: TSC times in records (kRecordTsc) and open spans, RingHeader::anchor_tsc and
// anchor_origin, reentrant-drop markers.
// Version 3: packed integer attributes (kRecordPackedAttrs, packed_attrs.h).
// Version 4: the drainer's journaled max_size count (SegmentHeader::journal_max_size and
// max_size_dropped, in what was the header's tail padding).
// Version 5: the string table (StringEntry, SegmentHeader::strings_offset, string_entries,
// strings_full), one-slot compact records (kRecordCompact, CompactRecord) and OpenSpan naming
// its span by string id (OpenSpan::name_id).
// Version 6: OpenSpan without depth (its index) and callable hash; name_id, flags and name_len
// one word at offset 16, kOpenTsc bit 0 (so the inline Span begin notes a span in 3 stores).
// Version 7: the drainer's journaled unwritten count (SegmentHeader::journal_unwritten and
// unwritten, in what was the header's tail padding).
inline constexpr uint32_t kLayoutVersion = 7;

// One slot is one cache line: the producer's store of a one-slot record touches one line.
inline constexpr uint32_t kSlotBytes = 64;
// [STRACE] caps count encoded bytes: name 64, attrs 192 (strace-format.md, "Truncation"). Every
// encoded unit is at least one raw byte, so 64 raw bytes always reach the cap; one more raw byte
// tells the drainer that the input went on and must be cut with `~`.
inline constexpr uint32_t kNameCap = 64;
inline constexpr uint32_t kAttrsCap = 192;
inline constexpr uint32_t kNameRawMax = kNameCap + 1;    // bytes
inline constexpr uint32_t kAttrsRawMax = kAttrsCap + 1;  // bytes
// Packed attributes (kRecordPackedAttrs) take at most one byte more than the text they stand for
// (packed_attrs.h), so this many packed bytes always reach kAttrsRawMax bytes of text.
inline constexpr uint32_t kAttrsPackedMax = kAttrsRawMax + 1;  // bytes

// Ring states (RingHeader::state). Zero must be kFree (zero-filled memory reads as free).
inline constexpr uint32_t kRingFree = 0;
inline constexpr uint32_t kRingClaiming = 1;
inline constexpr uint32_t kRingActive = 2;
inline constexpr uint32_t kRingReleased = 3;
inline constexpr uint32_t kRingQuarantined = 4;

// SegmentHeader::init_state.
inline constexpr uint32_t kInitZero = 0;
inline constexpr uint32_t kInitReady = 2;

// RecordHeader::flags.
// The producer could not accept this record's content (NULL or empty name, negative ts/dur/depth)
// and published it as a one-slot drop marker: it consumes a sequence number and is reported as a
// drop with reason `invalid`, never as a [STRACE] line.
inline constexpr uint16_t kRecordInvalid = 1u << 0;
// A signal handler emitted records while its thread was inside a record write (the ring is SPSC,
// so the handler cannot write): the interrupted write, once done, publishes this one-slot marker.
// dur_ns = the number of such records (1..2^32), which take sequence numbers seq..seq+dur_ns-1;
// reported as a drop with reason `reentrant`. name_len == attrs_len == 0.
inline constexpr uint16_t kRecordReentrant = 1u << 1;
// ts_ns and dur_ns are TSC ticks, not ns: a Span timed with rdtsc (the producer's hot path, when
// the CPU has an invariant TSC). The drainer converts them to CLOCK_MONOTONIC ns from the ring's
// (anchor_tsc, anchor_mono_ns) pair and its own (TSC, CLOCK_MONOTONIC) samples.
inline constexpr uint16_t kRecordTsc = 1u << 2;
// The attribute bytes are packed tokens (packed_attrs.h: integers stored as bytes, keys as
// given), not raw text: a Span's integer attributes, which the drainer formats in decimal.
// attrs_len counts packed bytes, 1..kAttrsPackedMax.
inline constexpr uint16_t kRecordPackedAttrs = 1u << 3;
// The slot is a CompactRecord (one slot; name and keys are string ids), not a RecordHeader.
// Never together with kRecordPackedAttrs or a marker bit; may carry kRecordTsc.
inline constexpr uint16_t kRecordCompact = 1u << 4;
inline constexpr uint16_t kRecordMarkers = kRecordInvalid | kRecordReentrant;
inline constexpr uint16_t kRecordFlagsKnown =
    kRecordMarkers | kRecordTsc | kRecordPackedAttrs | kRecordCompact;
inline constexpr uint64_t kReentrantMarkerMax = 0xffffffffu;

// First slot of every record. Explicit-width fields only; padding is explicit.
struct RecordHeader {
  uint64_t seq;        // per-ring record sequence number, from 0 for each owner; gaps are drops
  uint64_t ts_ns;      // span start, CLOCK_MONOTONIC ns (device spans: the caller's device
                       // clock; kRecordTsc: TSC ticks)
  uint64_t dur_ns;     // duration, ns (kRecordTsc: TSC ticks)
  uint64_t inv;        // invocation id, 0 = none
  uint64_t hid;        // callable hash, 0 = none
  uint32_t depth;      // nesting depth, 0 = outermost
  uint16_t name_len;   // raw name bytes stored, 1..kNameRawMax (0 only in drop markers)
  uint16_t attrs_len;  // raw attribute bytes stored, 0..kAttrsRawMax (packed: 1..kAttrsPackedMax)
  uint16_t slots;      // slots this record occupies, 1..kMaxRecordSlots
  uint16_t flags;      // kRecord* bits
  char payload[12];    // first raw name/attribute bytes; the rest follow in the next slots
};
static_assert(std::is_standard_layout_v<RecordHeader>);
static_assert(sizeof(RecordHeader) == kSlotBytes);
static_assert(offsetof(RecordHeader, seq) == 0);
static_assert(offsetof(RecordHeader, ts_ns) == 8);
static_assert(offsetof(RecordHeader, dur_ns) == 16);
static_assert(offsetof(RecordHeader, inv) == 24);
static_assert(offsetof(RecordHeader, hid) == 32);
static_assert(offsetof(RecordHeader, depth) == 40);
static_assert(offsetof(RecordHeader, name_len) == 44);
static_assert(offsetof(RecordHeader, attrs_len) == 46);
static_assert(offsetof(RecordHeader, slots) == 48);
static_assert(offsetof(RecordHeader, flags) == 50);
static_assert(offsetof(RecordHeader, payload) == 52);

inline constexpr uint32_t kInlinePayloadBytes = sizeof(RecordHeader::payload);

// Slots needed for a record carrying `payload_bytes` raw name+attribute bytes.
// 1 up to kInlinePayloadBytes, then one more per kSlotBytes begun: written without a branch,
// in 64 bits so that no uint32_t input overflows (the writers compute it on every record).
constexpr uint32_t record_slots(uint32_t payload_bytes) noexcept {
  return static_cast<uint32_t>((uint64_t{payload_bytes} + 2 * kSlotBytes - kInlinePayloadBytes -
                                1) / kSlotBytes);
}
static_assert(record_slots(0) == 1 && record_slots(kInlinePayloadBytes) == 1 &&
              record_slots(kInlinePayloadBytes + 1) == 2 &&
              record_slots(kInlinePayloadBytes + kSlotBytes) == 2 &&
              record_slots(kInlinePayloadBytes + kSlotBytes + 1) == 3 &&
              record_slots(0xffffffffu) ==
                  1 + (uint64_t{0xffffffffu} - kInlinePayloadBytes + kSlotBytes - 1) / kSlotBytes);
// The largest record: a cut name and cut or packed attributes (65 + 194 bytes) -> 5 slots.
inline constexpr uint32_t kMaxRecordSlots = record_slots(kNameRawMax + kAttrsPackedMax);
static_assert(kMaxRecordSlots == 5);

// ---- the string table and compact records (version 5)

// The string table: kStringTableEntries entries of StringEntry, open addressing on a hash of the
// bytes (StringEntry::hash), at most kStringProbeMax entries probed per lookup. A string's id
// is its entry index; id 0 is never used (it means "no string"). Entries are never freed or
// rewritten in a segment's life, so an id means the same bytes to every process and to the
// drainer. A table that has no room within the probe limit makes the producer fall back to an
// ordinary (inline) record, counted in SegmentHeader::strings_full; nothing is lost.
inline constexpr uint32_t kStringTableEntries = 4096;  // entries (ids 1..4095)
inline constexpr uint32_t kStringMaxBytes = 64;        // bytes: longer strings are never interned
inline constexpr uint32_t kStringProbeMax = 32;        // entries probed per lookup/insert

// StringEntry::state.
inline constexpr uint32_t kStringEmpty = 0;    // zero-filled memory reads as empty
inline constexpr uint32_t kStringWriting = 1;  // taken by a producer that is writing it
inline constexpr uint32_t kStringReady = 2;    // complete; never changes again

// One interned string: a span name or an attribute key, raw bytes (encoded by the drainer like
// inline ones). A producer takes an empty entry with a CAS kStringEmpty -> kStringWriting
// (relaxed is enough for the CAS: nothing is published by it), writes hash, len, writer_pid
// and bytes, then stores kStringReady with release; a reader acquires state and reads the rest
// only when it is kStringReady. A producer killed while writing leaves the entry kStringWriting
// for good: lookups probe past it and the drainer never reads it (no record can name it, since
// its writer publishes an id only after kStringReady). The drainer still validates every entry
// it reads (len in 1..kStringMaxBytes, no NUL byte, hash matching the bytes).
struct StringEntry {
  std::atomic<uint32_t> state;  // kString*
  uint32_t hash;                // string_hash(bytes, len)
  uint32_t len;                 // bytes, 1..kStringMaxBytes
  uint32_t writer_pid;          // the process that wrote it (stat, diagnostics)
  char bytes[kStringMaxBytes];  // not NUL-terminated
};
static_assert(std::is_standard_layout_v<StringEntry>);
static_assert(sizeof(StringEntry) == 80);
static_assert(offsetof(StringEntry, hash) == 4);
static_assert(offsetof(StringEntry, len) == 8);
static_assert(offsetof(StringEntry, bytes) == 16);

// The hash of an interned string (FNV-1a, 32 bits, over the raw bytes): the probe start of
// every lookup, and a check the drainer makes on each entry it reads. Any producer, any side.
constexpr uint32_t string_hash(const char* bytes, uint32_t len) noexcept {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < len; ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 16777619u;
  }
  return h;
}

// Integer attributes a compact record holds (values of 32 bits; see CompactRecord::attrs).
inline constexpr uint32_t kCompactAttrs = 4;

// One-slot record of a span whose name and attribute keys are interned (kRecordCompact). Its
// `slots` and `flags` sit where RecordHeader has them. Written only when the record directly
// follows the ring's previous record in sequence (no gap: the producer writes the first record
// after a drop as a RecordHeader, which carries the whole sequence number), so the drainer
// knows its full sequence number and checks `seq_lo` against it. A span that does not fit
// (a dynamic name or key, text attributes, more than kCompactAttrs of them, a value outside 32
// bits, dur >= 2^32, depth > 255) is written as an ordinary record; the output is the same.
// Instead of integer attributes a compact record may name one interned attribute text
// (kCompactAttrsText).
struct CompactRecord {
  uint64_t ts_ns;      // span start: CLOCK_MONOTONIC ns, or TSC ticks with kRecordTsc
  uint64_t inv;        // invocation id, 0 = none
  uint64_t hid;        // callable hash, 0 = none
  uint32_t values[kCompactAttrs];  // attribute values: two's complement when signed (attrs)
  uint32_t dur_ns;     // duration, ns (kRecordTsc: TSC ticks), < 2^32
  uint32_t seq_lo;     // low 32 bits of the record's sequence number
  uint16_t slots;      // 1
  uint16_t flags;      // kRecordCompact, optionally kRecordTsc
  uint16_t name;       // string id of the name (1..kStringTableEntries-1)
  uint16_t keys[kCompactAttrs];  // string ids of the first `count` attribute keys
  uint8_t depth;       // nesting depth, 0..255
  uint8_t attrs;       // bits 0-2: attribute count, 0..kCompactAttrs; bit 4+i: value i signed;
                       // kCompactAttrsText: keys[0] is the whole attribute text (count 0)
};
// CompactRecord::attrs: the attribute text is the interned string keys[0] (a constant `k=v ...`
// text, e.g. emit()'s literal attrs), raw like inline attributes; count is 0, values unused.
inline constexpr uint8_t kCompactAttrsText = 1u << 3;
static_assert(std::is_standard_layout_v<CompactRecord>);
static_assert(sizeof(CompactRecord) == kSlotBytes);
static_assert(offsetof(CompactRecord, values) == 24);
static_assert(offsetof(CompactRecord, dur_ns) == 40);
static_assert(offsetof(CompactRecord, seq_lo) == 44);
static_assert(offsetof(CompactRecord, slots) == offsetof(RecordHeader, slots));
static_assert(offsetof(CompactRecord, flags) == offsetof(RecordHeader, flags));
static_assert(offsetof(CompactRecord, name) == 52);
static_assert(offsetof(CompactRecord, keys) == 54);
static_assert(offsetof(CompactRecord, depth) == 62);
static_assert(offsetof(CompactRecord, attrs) == 63);

// The smallest ring must hold the largest record with room to spare, so that a ring is never
// permanently too small for a record; 16 slots = 1 KiB.
inline constexpr uint32_t kMinRingCapacity = 16;        // slots
inline constexpr uint32_t kMaxRingCapacity = 1u << 24;  // slots (1 GiB per ring): sanity bound
inline constexpr uint32_t kMaxRingCount = 1u << 16;     // rings: sanity bound

// A span that is open (begun, not yet ended) on a ring's owner thread: written by the owner at
// Span begin, read by the drainer only after the owner died, to report it as unfinished. Its
// name is either the string-table entry `name_id` (when non-zero: an interned name, no bytes
// copied) or the first name_len bytes of `name`. The entry at open[d] is the span at depth d:
// its depth is its index, not stored. The callable hash is not kept (an unfinished span is
// reported with its invocation only). name_id, flags and name_len are one 32-bit word, which
// the inline Span begin writes with one store (span.h, open_note_word): for an interned name
// timed by the counter it is name_id | kOpenTsc << 16, the low 32 bits of a SPANRING_SPAN
// site's word (kOpenTsc << 16 == kGateOpen, static_assert'ed in span.h).
struct OpenSpan {
  uint64_t ts_ns;      // span start, CLOCK_MONOTONIC ns, or TSC ticks when kOpenTsc is set
  uint64_t inv;        // invocation id
  uint16_t name_id;    // string id of the whole name; 0: the name is in name[]
  uint8_t flags;       // kOpenTsc, kOpenNameCut
  uint8_t name_len;    // raw name bytes stored in name[], 0..kOpenNameBytes (0 with name_id)
  uint32_t reserved0;  // 0; never written by the producer, never read
  char name[32];       // the first raw name bytes
  uint64_t reserved1;  // 0; never written by the producer, never read
};
static_assert(std::is_standard_layout_v<OpenSpan>);
static_assert(sizeof(OpenSpan) == 64);
static_assert(offsetof(OpenSpan, inv) == 8);
static_assert(offsetof(OpenSpan, name_id) == 16);
static_assert(offsetof(OpenSpan, flags) == 18);
static_assert(offsetof(OpenSpan, name_len) == 19);
static_assert(offsetof(OpenSpan, name) == 24);
// OpenSpan::flags.
inline constexpr uint8_t kOpenTsc = 1u << 0;      // ts_ns is TSC ticks (as with kRecordTsc)
inline constexpr uint8_t kOpenNameCut = 1u << 1;  // the name went on past name[] (report: `~`)
inline constexpr uint32_t kOpenNameBytes = sizeof(OpenSpan::name);
// Open spans kept per thread for crash reports; deeper ones are counted (open_depth) but not
// described. Eight covers the nesting of the runtimes [STRACE] comes from (depth <= 4).
inline constexpr uint32_t kOpenSpanMax = 8;

// Per-ring header, kRingHeaderBytes. The producer's line (head) and the drainer's line (tail)
// never share a cache line; the open-span stack follows on lines of its own.
struct alignas(64) RingHeader {
  // ---- line 0: ownership. Written by the claiming thread while kClaiming, read by the drainer
  // after it observes kActive/kReleased with acquire.
  std::atomic<uint32_t> state;  // kRing*
  uint32_t owner_pid;           // getpid() of the owner process
  uint32_t owner_tid;           // gettid() of the owner thread
  uint32_t generation;          // incremented by every claim; tells owners of one ring apart
  uint64_t owner_start_time;    // owner process start, clock ticks since boot (/proc/PID/stat #22)
  uint64_t anchor_mono_ns;      // owner process clock anchor: CLOCK_MONOTONIC ns ...
  uint64_t anchor_wall_ns;      // ... and CLOCK_REALTIME ns, read together at the process' attach
  char thread_name[16];         // prctl name or set_thread_name() at claim; NUL-terminated unless 16
  uint64_t anchor_tsc;          // TSC read with anchor_mono_ns (its midpoint); 0: no TSC times

  // ---- line 1: producer-owned.
  std::atomic<uint64_t> head;   // slots published (monotonic, wraps at 2^64)
  std::atomic<uint64_t> drops;  // records this owner dropped because the ring was full
  std::atomic<uint32_t> open_depth;  // Spans open on the owner thread (entries in open[])
  // 1: the process emitted a record that starts before its anchor, so its anchor is announced
  // as (0, anchor_wall_ns - anchor_mono_ns), which precedes every host timestamp.
  std::atomic<uint32_t> anchor_origin;
  uint8_t reserved1[40];

  // ---- line 2: drainer-owned. Together with the segment's commit journal, what a restarted
  // drainer needs to resume this owner exactly where the file ends.
  std::atomic<uint64_t> tail;   // slots consumed and written to the output (monotonic)
  uint64_t next_seq;            // sequence number expected at tail
  uint64_t drops_reported;      // this owner's drops already written as [SPANRING_DROPS]
  uint32_t drained_generation;  // the owner generation next_seq/drops_reported belong to
  uint8_t reserved2[36];

  // ---- lines 3..10: the owner's open spans, outermost first.
  OpenSpan open[kOpenSpanMax];
};
static_assert(std::is_standard_layout_v<RingHeader>);
static_assert(sizeof(RingHeader) == 192 + 64 * kOpenSpanMax);
static_assert(offsetof(RingHeader, state) == 0);
static_assert(offsetof(RingHeader, owner_start_time) == 16);
static_assert(offsetof(RingHeader, thread_name) == 40);
static_assert(offsetof(RingHeader, head) == 64);
static_assert(offsetof(RingHeader, drops) == 72);
static_assert(offsetof(RingHeader, open_depth) == 80);
static_assert(offsetof(RingHeader, anchor_tsc) == 56);
static_assert(offsetof(RingHeader, anchor_origin) == 84);
static_assert(offsetof(RingHeader, tail) == 128);
static_assert(offsetof(RingHeader, next_seq) == 136);
static_assert(offsetof(RingHeader, drained_generation) == 152);
static_assert(offsetof(RingHeader, open) == 192);
inline constexpr uint32_t kRingHeaderBytes = sizeof(RingHeader);

// One entry of the drainer's commit journal: a ring's drainer line as it must be once the
// buffer being committed is in the file.
struct JournalEntry {
  uint32_t ring;            // ring index
  uint32_t generation;      // owner generation
  uint64_t tail;
  uint64_t next_seq;
  uint64_t drops_reported;
  uint32_t free_after;      // 1: the owner is gone and fully written: free the ring
  uint32_t reserved;
};
static_assert(std::is_standard_layout_v<JournalEntry>);
static_assert(sizeof(JournalEntry) == 40);

struct alignas(64) SegmentHeader {
  // ---- written once by the creator; `magic` last, with release.
  std::atomic<uint64_t> magic;    // kSegmentMagic once the segment is ready
  uint32_t layout_version;        // kLayoutVersion of the creator
  uint32_t header_bytes;          // sizeof(SegmentHeader)
  uint32_t slot_bytes;            // kSlotBytes
  uint32_t ring_header_bytes;     // kRingHeaderBytes
  uint32_t ring_count;            // rings in the table
  uint32_t ring_capacity;         // slots per ring, a power of two in [kMinRingCapacity, kMax...]
  uint64_t rings_offset;          // byte offset of RingHeader[0]
  uint64_t journal_offset;        // byte offset of JournalEntry[ring_count]
  uint64_t slots_offset;          // byte offset of ring 0's first slot
  uint64_t segment_bytes;         // total size the creator mapped
  uint64_t creator_start_time;    // the creating process' start time, clock ticks since boot
  uint32_t creator_pid;           // the process that created the segment
  uint32_t reserved0;
  uint64_t strings_offset;        // byte offset of StringEntry[string_entries]
  uint32_t string_entries;        // kStringTableEntries
  uint32_t string_entry_bytes;    // sizeof(StringEntry)

  // ---- any producer: records dropped because every ring was taken, and records a vfork child
  // tried to emit before exec (it shares its parent's memory and must not touch the parent's
  // ring). fetch_add, relaxed: report counters with no ordering to other data.
  alignas(64) std::atomic<uint64_t> no_ring_drops;
  std::atomic<uint64_t> vfork_drops;
  // Strings a producer could not intern (no empty entry within kStringProbeMax): each such
  // span went out as an ordinary record instead. Not a loss; shown by `spanring stat`.
  std::atomic<uint64_t> strings_full;
  // Rings claimed so far (wraps): a claimer adds 1 once its ring is kRingActive and then wakes
  // the drainer with FUTEX_WAKE on this word; the drainer's idle wait is a FUTEX_WAIT on it
  // (drain/drainer.h, wait_for_claim), so a thread's first records are read within a warm
  // poll (<= 1 ms), not after the rest of an idle sleep (up to 20 ms). Zero in a new segment
  // (layout version 6). A count only, never trusted for anything else: a changed value makes
  // the drainer look at every ring once, a word that never changes leaves it to its idle
  // polls. fetch_add, release (claim_ring).
  std::atomic<uint32_t> ring_claims;
  uint8_t reserved1[36];

  // ---- the drainer. One drainer at a time: `drainer_pid` is taken with a CAS from 0 (or from
  // a drainer that is dead, by pid + start time).
  alignas(64) std::atomic<uint32_t> drainer_pid;
  uint32_t reserved2;
  uint64_t drainer_start_time;
  // Commit record: the output file (device, inode) and the byte offset up to which it holds
  // complete lines matching every ring's drainer line. A commit writes the journal entries and
  // `journal_end`, makes `journal_seq` odd (release), applies the entries, sets `commit_offset`
  // and makes `journal_seq` even (release). A drainer that finds it odd re-applies the journal.
  uint64_t output_dev;
  uint64_t output_ino;
  std::atomic<uint64_t> commit_offset;
  std::atomic<uint64_t> journal_seq;
  uint64_t journal_end;           // commit_offset once the pending journal is applied
  uint32_t journal_count;         // entries in the pending journal
  uint32_t reserved3;
  // Reported totals, so that a restarted drainer's summary covers the whole run.
  uint64_t no_ring_reported;      // no_ring_drops already written as [SPANRING_DROPS]
  uint64_t vfork_reported;        // vfork_drops already written
  // --max-size: records the drainer consumed but kept out of the output file because it was
  // full, and has not yet reported in the file (the drops line it writes when it finishes
  // resets it to 0). Journaled: a commit writes journal_max_size before the seq turns odd and
  // copies it to max_size_dropped with the entries, so a restarted drainer's count stays exact.
  uint64_t journal_max_size;      // max_size_dropped once the pending journal is applied
  uint64_t max_size_dropped;
  // Records drained whose write to the output failed (ENOSPC, EIO...), by every drainer of
  // this segment so far: a restarted drainer's summary counts them with its own. Journaled as
  // max_size_dropped is (journal_unwritten, copied to unwritten with the entries).
  uint64_t journal_unwritten;     // unwritten once the pending journal is applied
  uint64_t unwritten;
};
static_assert(std::is_standard_layout_v<SegmentHeader>);
static_assert(sizeof(SegmentHeader) == 320);
static_assert(offsetof(SegmentHeader, layout_version) == 8);
static_assert(offsetof(SegmentHeader, ring_count) == 24);
static_assert(offsetof(SegmentHeader, rings_offset) == 32);
static_assert(offsetof(SegmentHeader, journal_offset) == 40);
static_assert(offsetof(SegmentHeader, creator_start_time) == 64);
static_assert(offsetof(SegmentHeader, strings_offset) == 80);
static_assert(offsetof(SegmentHeader, string_entries) == 88);
static_assert(offsetof(SegmentHeader, no_ring_drops) == 128);
static_assert(offsetof(SegmentHeader, strings_full) == 144);
static_assert(offsetof(SegmentHeader, ring_claims) == 152);
static_assert(offsetof(SegmentHeader, drainer_pid) == 192);
static_assert(offsetof(SegmentHeader, commit_offset) == 224);
static_assert(offsetof(SegmentHeader, max_size_dropped) == 280);
static_assert(offsetof(SegmentHeader, journal_unwritten) == 288);
static_assert(offsetof(SegmentHeader, unwritten) == 296);
inline constexpr uint32_t kSegmentHeaderBytes = sizeof(SegmentHeader);

// Atomics overlaid on shared memory must be lock-free and exactly the plain type's size, or two
// processes would not agree on them.
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint64_t>) == 8);
static_assert(sizeof(std::atomic<uint32_t>) == 4);

// Where things are in a segment of `ring_count` rings of `ring_capacity` slots.
constexpr uint64_t rings_offset() noexcept { return kSegmentHeaderBytes; }
constexpr uint64_t journal_offset(uint32_t ring_count) noexcept {
  return rings_offset() + uint64_t{ring_count} * kRingHeaderBytes;
}
constexpr uint64_t strings_offset(uint32_t ring_count) noexcept {
  // The string table starts on a cache line.
  return (journal_offset(ring_count) + uint64_t{ring_count} * sizeof(JournalEntry) + 63) &
         ~uint64_t{63};
}
constexpr uint64_t slots_offset(uint32_t ring_count) noexcept {
  // Slots start on a cache line.
  return (strings_offset(ring_count) + uint64_t{kStringTableEntries} * sizeof(StringEntry) +
          63) & ~uint64_t{63};
}
constexpr uint64_t segment_bytes(uint32_t ring_count, uint32_t ring_capacity) noexcept {
  return slots_offset(ring_count) + uint64_t{ring_count} * ring_capacity * kSlotBytes;
}

}  // namespace spanring
