// The ring: one SPSC queue of 64-byte slots in the segment, written by one producer thread
// (RingWriter) and read by the drainer (RingReader). Layout and ownership of every field:
// include/spanring/segment_layout.h ("Who writes what").
//
//   slots:  ... | tail (drainer, shared) ........ head (producer, shared) | free ... |
//                 ^ RingReader::position() is at or past tail: read, not yet committed
//
// Each side keeps its own counter privately and publishes it (release); it reads the peer's
// counter with acquire, and only when it has to. The names say which is which:
//   shared_->head   the producer's published head (RingHeader line 1)
//   own_head_       the producer's private copy of it (RingWriter; equal to shared head
//                   whenever no record is being written)
//   cached_tail_    the producer's last read of the drainer's shared tail; reread only when
//                   the ring looks full, so the producer rarely touches the drainer's line
//   shared_->tail   the drainer's published tail (RingHeader line 2), moved by its commit
//                   journal once the records below it are in the file (drain/journal.h)
//   position_       the drainer's private read position, at or past the shared tail
//
// A record is 1..kMaxRecordSlots consecutive slots: a RecordHeader whose last
// kInlinePayloadBytes start the payload (raw name bytes, then raw attribute bytes), which goes
// on through the following slots, wrapping at the ring's end like any slot.
#pragma once

#include "src/record_copy.h"
#include "src/string_table.h"

#include <spanring/segment_layout.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace spanring {

static_assert(offsetof(RecordHeader, payload) + kInlinePayloadBytes == kSlotBytes,
              "the inline payload ends where the next slot begins");

// ---- producer side ---------------------------------------------------------------------------

// The owner thread's end of one ring. Hot path: every method is noexcept, makes no syscall,
// takes no lock, allocates nothing, and touches only the ring's slots and producer line (the
// drainer's line only when the ring looks full). Owner thread only (a signal handler of the
// owner must not call it while the owner is inside a write: the producer guards that).
//
// Zero-initialised it is detached, which is how it starts in thread-local storage.
//
// Hidden: each library that writes records inlines its own copy (never a call through the PLT).
class __attribute__((visibility("hidden"))) RingWriter {
 public:
  // Takes the ring the calling thread has just claimed (state kClaiming): `shared` is its
  // header, `slots` its first slot, `capacity` its slot count (a power of two). Sequence
  // numbers start at 0 for every owner; the drop counter starts at 0.
  void attach(RingHeader* shared, std::byte* slots, uint32_t capacity) noexcept {
    shared_ = shared;
    slots_ = slots;
    mask_ = capacity - 1;
    // relaxed: both were last written before the drainer's release of kRingFree, which the
    // claim's CAS acquired.
    own_head_ = shared->head.load(std::memory_order_relaxed);
    cached_tail_ = shared->tail.load(std::memory_order_relaxed);
    next_seq_ = 0;
    own_drops_ = 0;
    gap_ = 0;
    shared->drops.store(0, std::memory_order_relaxed);
  }
  // Forgets the ring (thread exit hands it to the drainer; a fork child must not write into
  // its parent's ring). The ring itself is not touched.
  void detach() noexcept { shared_ = nullptr; }

  RingHeader* shared() const noexcept { return shared_; }  // null while detached
  uint64_t capacity() const noexcept { return mask_ + 1; }  // slots

  // Writes one record and publishes it (release of head): `name_len` raw name bytes and
  // `attrs_len` raw attribute bytes (their sum at most kNameRawMax + kAttrsPackedMax), the
  // header fields as given, the next sequence number. When the ring has no room the record is
  // dropped whole, counted (drops, release) and its sequence number skipped; returns false.
  bool write(const char* name, uint32_t name_len, const char* attrs, uint32_t attrs_len,
             uint64_t ts, uint64_t dur, uint64_t inv, uint64_t hid, uint32_t depth,
             uint16_t flags) noexcept {
    const uint32_t need = record_slots(name_len + attrs_len);
    if (!has_room(need)) {
      count_drops(1);
      return false;
    }
    // The writer's fields in locals: the payload stores below could alias them (char), and
    // would make every one be reloaded.
    const uint64_t head = own_head_;
    const uint64_t seq = next_seq_;
    std::byte* const slots = slots_;
    const uint64_t mask = mask_;
    std::byte* first = slots + (head & mask) * kSlotBytes;
    auto* rec = reinterpret_cast<RecordHeader*>(first);
    rec->seq = seq;
    rec->ts_ns = ts;
    rec->dur_ns = dur;
    rec->inv = inv;
    rec->hid = hid;
    rec->depth = depth;
    rec->name_len = static_cast<uint16_t>(name_len);
    rec->attrs_len = static_cast<uint16_t>(attrs_len);
    rec->slots = static_cast<uint16_t>(need);
    rec->flags = flags;
    if ((head & mask) + need <= mask + 1) {
      // The record does not wrap: its payload is contiguous, from the header's payload field
      // into the slots that follow (addressed from the slot bytes, not from the 12-byte
      // member, which it runs past). A drop marker has no name: copy_bytes reads nothing for 0.
      auto* dst = reinterpret_cast<char*>(first + offsetof(RecordHeader, payload));
      copy_bytes(dst, name, name_len);
      copy_bytes(dst + name_len, attrs, attrs_len);
    } else {
      put_payload(0, name, name_len);
      put_payload(name_len, attrs, attrs_len);
    }
    next_seq_ = seq + 1;
    gap_ = 0;
    own_head_ = head + need;
    // release: the record's bytes are visible to the drainer's acquire of head.
    shared_->head.store(head + need, std::memory_order_release);
    prefetch_after(slots, mask, head + need, need);
    return true;
  }

  // Whether the next record may be a CompactRecord: no record was dropped since the last one
  // written. A compact record carries only the low 32 bits of its sequence number, so the
  // drainer must know it from the record before (the first record after a drop is ordinary).
  bool compact_allowed() const noexcept { return gap_ == 0; }

  // Writes one CompactRecord (one slot) and publishes it (release of head): the fields as
  // given (`keys`: the 4 key ids, key i in bits 16i..16i+15; `flags`: kRecordCompact, maybe
  // kRecordTsc), seq_lo from the next sequence number. Call only when compact_allowed(). When
  // the ring has no room the record is dropped and counted like write()'s; returns false.
  bool write_compact(uint64_t ts, uint64_t inv, uint64_t hid, const uint32_t* values,
                     uint32_t dur, uint16_t flags, uint16_t name, uint64_t keys, uint8_t depth,
                     uint8_t attrs) noexcept {
    if (!has_room(1)) {
      count_drops(1);
      return false;
    }
    // The writer's fields in locals: the slot stores below cannot alias them then, so none is
    // reloaded; the record is 8 stores of 8 bytes.
    const uint64_t head = own_head_;
    const uint64_t seq = next_seq_;
    std::byte* const slots = slots_;
    const uint64_t mask = mask_;
    std::byte* const rec = slots + (head & mask) * kSlotBytes;
    static_assert(offsetof(CompactRecord, seq_lo) == 44 && offsetof(CompactRecord, keys) == 54 &&
                  offsetof(CompactRecord, depth) == 62, "the words below follow this layout");
    store_word(rec, 0, ts);
    store_word(rec, 1, inv);
    store_word(rec, 2, hid);
    std::memcpy(rec + 24, values, 16);
    store_word(rec, 5, dur | (seq & 0xffffffffu) << 32);  // dur_ns, seq_lo
    // slots = 1, flags, name, keys[0]; then keys[1..3], depth, attrs (little-endian, x86-64)
    store_word(rec, 6, 1u | uint64_t{flags} << 16 | uint64_t{name} << 32 | keys << 48);
    store_word(rec, 7, keys >> 16 | uint64_t{depth} << 48 | uint64_t{attrs} << 56);
    next_seq_ = seq + 1;
    own_head_ = head + 1;
    // release: the record's bytes are visible to the drainer's acquire of head.
    shared_->head.store(head + 1, std::memory_order_release);
    prefetch_after(slots, mask, head + 1, 1);
    return true;
  }

  // Publishes a kRecordReentrant marker: `n` records (1..kReentrantMarkerMax) a signal handler
  // emitted while this thread was inside write(); they take sequence numbers seq..seq+n-1.
  // When the ring is full they are counted as ring_full drops instead.
  void write_reentrant_marker(uint32_t n) noexcept {
    if (!has_room(1)) {
      count_drops(n);
      return;
    }
    auto* rec = reinterpret_cast<RecordHeader*>(slot(own_head_));
    rec->seq = next_seq_;
    rec->ts_ns = 0;
    rec->dur_ns = n;
    rec->inv = 0;
    rec->hid = 0;
    rec->depth = 0;
    rec->name_len = 0;
    rec->attrs_len = 0;
    rec->slots = 1;
    rec->flags = kRecordReentrant;
    next_seq_ += n;
    gap_ = 0;  // the marker carries the whole sequence number
    own_head_ += 1;
    // release: the marker's bytes are visible to the drainer's acquire of head.
    shared_->head.store(own_head_, std::memory_order_release);
  }

 private:
  // How far ahead of head prefetch_after() fetches slots for writing: 16 slots (1 KiB, a few
  // records), far enough that a line taken back from the drainer's core (~100 ns) arrives
  // before the record that needs it. In a ring of kMinRingCapacity slots it wraps onto the
  // slots just written, which costs nothing.
  static constexpr uint32_t kPrefetchSlots = 16;

  static void store_word(std::byte* rec, uint32_t i, uint64_t v) noexcept {
    std::memcpy(rec + 8 * i, &v, 8);
  }

  std::byte* slot(uint64_t pos) const noexcept { return slots_ + (pos & mask_) * kSlotBytes; }

  // Whether `need` slots are free; rereads the drainer's tail only when the cached one says
  // the ring is full.
  bool has_room(uint32_t need) noexcept {
    const uint64_t cap = mask_ + 1;
    if (own_head_ + need - cached_tail_ <= cap) return true;
    // acquire: pairs with the drainer's release of tail, made after it finished reading the
    // slots below tail, so our writes to them cannot race its reads.
    cached_tail_ = shared_->tail.load(std::memory_order_acquire);
    return own_head_ + need - cached_tail_ <= cap;
  }

  // `n` records found the ring full: their sequence numbers are never published (a gap).
  void count_drops(uint64_t n) noexcept {
    next_seq_ += n;
    gap_ = 1;
    own_drops_ += n;
    // release: the drainer pairs its acquire of drops with its acquire of head to attribute
    // the gap; only the owner writes drops, so a store of the private copy suffices.
    shared_->drops.store(own_drops_, std::memory_order_release);
  }

  // Fetches for writing, kPrefetchSlots ahead of the new head `head`, the slots of a record of
  // `need` slots: the drainer read each slot line on the ring's last lap, so a store to it must
  // first take the line back from the drainer's core (an RFO, ~100 ns here). Prefetched this far
  // ahead, it is back in this core's cache by the time a record lands on it, also after a pause.
  // The first and the last of them only (no loop): records of 1 and 2 slots, the common ones,
  // are covered whole; the middle slots of a longer one are left to the hardware prefetcher.
  static void prefetch_after(std::byte* slots, uint64_t mask, uint64_t head,
                             uint32_t need) noexcept {
    __builtin_prefetch(slots + ((head + kPrefetchSlots) & mask) * kSlotBytes, 1);
    if (need > 1)
      __builtin_prefetch(slots + ((head + kPrefetchSlots + need - 1) & mask) * kSlotBytes, 1);
  }

  // Copies `len` payload bytes to stream position `pos` of the record at head (positions
  // 0..11 are the first slot's payload, then 64 bytes per following slot, wrapping). Only for
  // a record that wraps around the ring's end; write() copies others in one piece.
  void put_payload(uint32_t pos, const char* src, uint32_t len) noexcept {
    while (len > 0) {
      std::byte* dst;
      uint32_t room;
      if (pos < kInlinePayloadBytes) {
        dst = slot(own_head_) + offsetof(RecordHeader, payload) + pos;
        room = kInlinePayloadBytes - pos;
      } else {
        const uint32_t q = pos - kInlinePayloadBytes;
        dst = slot(own_head_ + 1 + q / kSlotBytes) + q % kSlotBytes;
        room = kSlotBytes - q % kSlotBytes;
      }
      const uint32_t n = len < room ? len : room;
      std::memcpy(dst, src, n);
      src += n;
      pos += n;
      len -= n;
    }
  }

 public:
  // Copies n <= 32 bytes inline, with two (overlapping) moves of one size class: the
  // open-span note of every Span would otherwise pay a call into memcpy.
  static void copy_small(char* dst, const char* src, uint32_t n) noexcept {
    if (n >= 16) {
      std::memcpy(dst, src, 16);
      std::memcpy(dst + n - 16, src + n - 16, 16);
    } else if (n >= 8) {
      std::memcpy(dst, src, 8);
      std::memcpy(dst + n - 8, src + n - 8, 8);
    } else if (n >= 4) {
      std::memcpy(dst, src, 4);
      std::memcpy(dst + n - 4, src + n - 4, 4);
    } else if (n != 0) {
      dst[0] = src[0];
      dst[n / 2] = src[n / 2];
      dst[n - 1] = src[n - 1];
    }
  }

  // Copies n bytes inline: 32-byte moves and an overlapping last one (a record's payload is
  // at most kNameRawMax + kAttrsPackedMax bytes; a call into memcpy costs more than the copy).
  static void copy_bytes(char* dst, const char* src, uint32_t n) noexcept {
    if (n <= 32) {
      copy_small(dst, src, n);
      return;
    }
    for (uint32_t i = 0; i + 32 < n; i += 32) std::memcpy(dst + i, src + i, 32);
    std::memcpy(dst + n - 32, src + n - 32, 32);
  }

 private:
  RingHeader* shared_;    // the ring's header in the segment; null while detached
  std::byte* slots_;      // the ring's first slot
  uint64_t mask_;         // capacity - 1, slots
  uint64_t own_head_;     // private copy of shared_->head
  uint64_t cached_tail_;  // last value read of shared_->tail (the drainer's)
  uint64_t next_seq_;     // sequence number of the next record
  uint64_t own_drops_;    // private copy of shared_->drops
  uint32_t gap_;          // 1: records were dropped since the last one written (no compact)
};

// ---- drainer side ----------------------------------------------------------------------------

enum class ReadStatus : uint8_t {
  kRecord,     // `out` holds a valid record occupying out.header.slots slots
  kCorrupt,    // the slots at the read position are not a valid record; `why` says what is wrong
  kBadString,  // a compact record, well framed, whose name or a key does not resolve in the
               // string table: it is consumed (the position moves past its one slot), out.header
               // holds its seq (and ts, depth), nothing else of it is usable; `why` says which id
               // and why. The ring is intact: the caller drops this one record (corrupt).
};

// The drainer's end of one ring. Treats the ring as untrusted: the head it is given is checked
// to be within one ring of its position, each record is copied out of shared memory once and
// the copy validated (slot count, lengths, flags, sequence, packed attributes, string ids of a
// compact record); a failed check returns kCorrupt with the reason instead of reading further.
// Never writes to the segment (the tail moves through the commit journal). Drainer thread only.
class RingReader {
 public:
  RingReader() noexcept = default;
  // Ring `shared` with its first slot at `slots` and `capacity` slots (a power of two), all
  // from a validated SegmentView; reading starts at `position` (the committed tail). `strings`
  // resolves the ids of compact records (kRecordCompact); shared by every ring of a segment
  // and must outlive the reader. Null: every compact record reads as kBadString.
  RingReader(const RingHeader* shared, const std::byte* slots, uint64_t capacity,
             uint64_t position, StringTableReader* strings = nullptr) noexcept
      : shared_(shared), slots_(slots), capacity_(capacity), position_(position),
        strings_(strings) {}

  // The producer's published head. acquire: pairs with its release of head; every slot below
  // the value read is complete.
  uint64_t head() const noexcept { return shared_->head.load(std::memory_order_acquire); }
  // The next slot to read (monotonic, wraps at 2^64 like head).
  uint64_t position() const noexcept { return position_; }
  uint64_t capacity() const noexcept { return capacity_; }  // slots

  // Copies the record at position() into `out` and validates the copy, given the `head` read
  // by head() (head - position() must be in 1..capacity, checked here) and the smallest
  // sequence number the record may carry: the caller's next expected one. An ordinary record
  // carries its sequence number; a compact record (kRecordCompact) is only written right after
  // the previous record, so its sequence number is `min_seq` and its seq_lo must match it
  // (else kCorrupt). A compact record comes out as the ordinary record of the same span would:
  // flags without kRecordCompact (kRecordTsc kept), name bytes resolved, attribute text
  // formatted as unpack_attrs formats packed integers (cut at kAttrsRawMax alike). On kRecord
  // and kBadString the position moves past the record.
  ReadStatus read(uint64_t head, uint64_t min_seq, RecordCopy& out, std::string& why);

  // The records in [position(), head), counted by walking their headers' slot counts (`slots`
  // is at the same offset in both record kinds) without copying or validating the records and
  // without moving position(): what a ring holds for `spanring stat`, which only looks. nullopt
  // when a slot count is out of range (0, or past kMaxRecordSlots) or runs a record past head;
  // head - position() must be at most capacity() (the caller checks it). Reads at most one
  // header per slot.
  std::optional<uint64_t> count_records(uint64_t head) const noexcept;

 private:
  ReadStatus read_compact(uint64_t pos, uint64_t min_seq, RecordCopy& out, std::string& why);

  const RingHeader* shared_ = nullptr;
  const std::byte* slots_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t position_ = 0;
  StringTableReader* strings_ = nullptr;
};

}  // namespace spanring
