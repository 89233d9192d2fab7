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
//   room_last_      the producer's last read of the drainer's shared tail plus the capacity
//                   minus 1 (the last free position); reread only when the ring looks full,
//                   so the producer rarely touches the drainer's line
//   shared_->tail   the drainer's published tail (RingHeader line 2), moved by its commit
//                   journal once the records below it are in the file (drain/journal.h)
//   position_       the drainer's private read position, at or past the shared tail
//
// A record is 1..kMaxRecordSlots consecutive slots: a RecordHeader whose last
// kInlinePayloadBytes start the payload (raw name bytes, then raw attribute bytes), which goes
// on through the following slots, wrapping at the ring's end like any slot.
#pragma once

#include "src/record_copy.h"
#include "src/record_decode.h"
#include "src/string_table.h"

#include <spanring/ring_writer.h>
#include <spanring/segment_layout.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace spanring {

// ---- producer side: RingWriter (include/spanring/ring_writer.h) ------------------------------

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
  // Inline: the text drainer calls it once per record, and the call (its register saves and
  // restores) was ~25 instructions of ~140 (callgrind, the demo); failures and compact records
  // go out of line.
  [[gnu::always_inline]] inline ReadStatus read(uint64_t head, uint64_t min_seq, RecordCopy& out,
                                                std::string& why);

  // The text drainer's direct path: the ordinary span record at position() when its line can
  // be written straight from the ring's slots, without the RecordCopy. Copies its header into
  // `h` (one read of the header's shared bytes; every decision is made on the copy) and returns
  // where its payload (name, then raw or packed attributes) starts in the slots, or nullptr when
  // the record needs read(): `head` - position() not in 1..capacity, a frame
  // check_ordinary_frame refuses (read() frames it again and says why), a sequence
  // number other than `seq` (a gap), a marker, a compact record, or a record that wraps at the
  // ring's end. The payload is contiguous and may be read rounded up to 16 bytes from the name's
  // and from the attributes' start (the line's vectors): those reads stay inside the record's
  // slots, or spill into the next slot only when that slot is below `stop` (published, and not
  // the line the producer is filling) and inside the ring; else nullptr. Moves nothing: the caller calls
  // advance(h.slots) once the line is written. The caller reads each payload byte once
  // (format_span_plain: check and copy from the same load, packed bytes copied out before they
  // are parsed): what is in the line is what was checked.
  [[gnu::always_inline]] inline const std::byte* peek_plain(uint64_t head, uint64_t stop,
                                                            uint64_t seq,
                                                            RecordHeader& h) const noexcept;

  // The text drainer's direct path for a compact record (kRecordCompact) at position(): copies
  // its slot into `c` and returns true when it frames as read() frames it (check_compact_frame
  // with sequence number `seq`; `why` gets the message otherwise, and read() says it again).
  // Its strings are the caller's to resolve. Moves nothing: advance(1) once the line is written.
  [[gnu::always_inline]] inline bool peek_compact(uint64_t head, uint64_t seq, CompactRecord& c,
                                                  std::string& why) const;

  // The records in [position(), head), counted by walking their headers' slot counts (`slots`
  // is at the same offset in both record kinds) without copying or validating the records and
  // without moving position(): what a ring holds for `spanring stat`, which only looks. nullopt
  // when a slot count is out of range (0, or past kMaxRecordSlots) or runs a record past head;
  // head - position() must be at most capacity() (the caller checks it). Reads at most one
  // header per slot.
  std::optional<uint64_t> count_records(uint64_t head) const noexcept;

  // Copies the `n` slots from position() + `from` on (from + n <= capacity()) into `out` as
  // they are, wrapping at the ring's end: the drainer's run path (binary version 3), which then
  // checks the copy, never the shared slots. Moves nothing.
  // Where the CPU has AVX2, 32-byte loads and stores (half the instructions of the 8-byte
  // `rep movsq` the compiler makes of memcpy here); memcpy otherwise.
  void copy_slots(uint64_t from, uint64_t n, std::byte* out) const noexcept;
  // Moves position() past `n` slots whose records the caller took from copy_slots().
  void advance(uint64_t n) noexcept { position_ += n; }

 private:
  ReadStatus read_compact(uint64_t pos, uint64_t min_seq, RecordCopy& out, std::string& why);
  [[gnu::cold]] ReadStatus bad_head(uint64_t head, std::string& why) const;

  const RingHeader* shared_ = nullptr;
  const std::byte* slots_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t position_ = 0;
  StringTableReader* strings_ = nullptr;
};

inline ReadStatus RingReader::read(uint64_t head, uint64_t min_seq, RecordCopy& out,
                                   std::string& why) {
  const uint64_t pos = position_;
  const uint64_t mask = capacity_ - 1;
  const uint64_t avail = head - pos;  // unsigned: wraps correctly at 2^64
  if (__builtin_expect(avail == 0 || avail > capacity_, 0)) return bad_head(head, why);
  std::memcpy(&out.header, slots_ + (pos & mask) * kSlotBytes, kSlotBytes);
  const RecordHeader& h = out.header;
  // `flags` sits at the same offset in both record kinds (segment_layout.h).
  if ((h.flags & kRecordCompact) != 0) return read_compact(pos, min_seq, out, why);
  if (!check_ordinary_frame(h, avail, min_seq, RecordWhere{"record at slot ", pos}, why))
    return ReadStatus::kCorrupt;
  // Payload: the kInlinePayloadBytes of the header slot, then the record's next slots whole
  // (each wraps on its own; slots <= avail was checked): fixed-size copies, no libc call.
  std::memcpy(out.payload, h.payload, kInlinePayloadBytes);
  for (uint64_t s = 1; s < h.slots; ++s)
    std::memcpy(out.payload + kInlinePayloadBytes + (s - 1) * kSlotBytes,
                slots_ + ((pos + s) & mask) * kSlotBytes, kSlotBytes);
  if (!finish_ordinary(out, RecordWhere{"record at slot ", pos}, why))
    return ReadStatus::kCorrupt;
  position_ = pos + h.slots;
  return ReadStatus::kRecord;
}

inline bool RingReader::peek_compact(uint64_t head, uint64_t seq, CompactRecord& c,
                                     std::string& why) const {
  const uint64_t pos = position_;
  const uint64_t avail = head - pos;  // unsigned: wraps correctly at 2^64
  if (__builtin_expect(avail == 0 || avail > capacity_, 0)) return false;
  std::memcpy(&c, slots_ + (pos & (capacity_ - 1)) * kSlotBytes, kSlotBytes);
  return check_compact_frame(c, seq, true, RecordWhere{"compact record at slot ", pos}, why);
}

inline const std::byte* RingReader::peek_plain(uint64_t head, uint64_t stop, uint64_t seq,
                                               RecordHeader& h) const noexcept {
  const uint64_t pos = position_;
  const uint64_t avail = head - pos;  // unsigned: wraps correctly at 2^64
  if (__builtin_expect(avail == 0 || avail > capacity_, 0)) return nullptr;
  const uint64_t at = pos & (capacity_ - 1);
  const std::byte* const slot = slots_ + at * kSlotBytes;
  std::memcpy(&h, slot, kSlotBytes);
  // `flags` sits at the same offset in both record kinds (segment_layout.h): a compact record
  // is refused here, before its bytes are read as an ordinary header's; so are markers and
  // unknown flags.
  const uint32_t flags = h.flags;
  if ((flags & (kRecordCompact | kRecordMarkers | ~uint32_t{kRecordFlagsKnown})) != 0 ||
      h.seq != seq)
    return nullptr;
  // check_ordinary_frame's conditions for an in-sequence span record (no marker, no compact,
  // known flags): a name of 1..kNameRawMax bytes, attributes within their bound (packed: not
  // empty), the slot count the lengths give (1..kMaxRecordSlots then), within `avail`. Without
  // its message: a record refused here goes to read(), which frames it again and says why
  // (test_ring: every frame read() refuses, peek_plain refuses). check_ordinary_frame here,
  // with the message's RecordWhere built for every record, was ~15 instructions more a record
  // (callgrind, the demo).
  const bool packed = (flags & kRecordPackedAttrs) != 0;
  const uint32_t name_len = h.name_len;
  const uint32_t attrs_len = h.attrs_len;
  if (name_len - 1 >= kNameRawMax || attrs_len > (packed ? kAttrsPackedMax : kAttrsRawMax) ||
      (packed && attrs_len == 0) || h.slots != record_slots(name_len + attrs_len) ||
      h.slots > avail)
    return nullptr;
  static_assert(record_slots(kNameRawMax + kAttrsPackedMax) <= kMaxRecordSlots);
  if (at + h.slots > capacity_) return nullptr;  // wraps: read() copies it slot by slot
  // The last byte the line may read: the name's bytes rounded up to 16 from the payload's
  // start, the attributes' (raw or packed) rounded up from the name's end (none when empty).
  const uint32_t name_end = (uint32_t{h.name_len} + 15) & ~15u;
  const uint32_t attrs_end = h.attrs_len == 0 ? 0 : h.name_len + ((h.attrs_len + 15u) & ~15u);
  const uint32_t read_end = offsetof(RecordHeader, payload) + (name_end > attrs_end ? name_end
                                                                                     : attrs_end);
  // Past the record's slots (by at most 15 bytes: the payload ends inside them), the reads
  // touch the next slot, whose bytes are not used.
  if (read_end > h.slots * kSlotBytes && (at + h.slots >= capacity_ || stop - pos <= h.slots))
    return nullptr;
  return slot + offsetof(RecordHeader, payload);
}

}  // namespace spanring
