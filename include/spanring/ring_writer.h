// RingWriter: the producer thread's end of one ring (the ring and its records:
// segment_layout.h). Public because Span's record path is inlined into the caller (span.h): a
// program compiled against this header writes slots itself, so this class's layout and code are
// part of libspanring's ABI (its soname, src/meson.build). Not an API: only the library and the
// inline code of span.h use it.
#pragma once

#include <spanring/segment_layout.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__)
#define SPANRING_HIDDEN __attribute__((visibility("hidden")))
#else
#define SPANRING_HIDDEN
#endif

namespace spanring {

static_assert(offsetof(RecordHeader, payload) + kInlinePayloadBytes == kSlotBytes,
              "the inline payload ends where the next slot begins");

// The gate word's bits (RingWriter::gate_, read by the inline record paths of span.h, the
// host-span adapter and the library): every bit is at or above bit 16 and the low 16 bits are
// always 0, so that a SPANRING_SPAN site word (epoch << 32 | kGateOpen | id) compares with the
// gate and epoch in one XOR whose low 16 bits (the id) are shifted out.
//   kGateOpen  a ring is claimed (by RingWriter's owner, in generation epoch_)
//   kGateBusy  inside a record write: a signal handler's record must not interleave
//   kGateVfork a vfork child runs on this thread's memory (set by the vfork wrapper)
//   kGateGap   records were dropped since the last one written: the next one is ordinary
//   kGateClock Spans are timed by clock_gettime, not the counter (no inline Span or emit)
//   kGateDeep  the thread's depth is past kDepthCompactMax (255), which a compact record's depth
//              byte cannot hold: a count in bits 21..23 (kGateDeepMask), not a single bit, see
//              below
// The inline Span and emit paths run when the gate is exactly kGateOpen; the text record path
// (record_any, the adapter) when it is kGateOpen give or take kGateGap, kGateClock and
// kGateDeepMask (its records carry their depth whole).
//
// kGateDeep: the library (src/producer.h, store_depth) adds kGateDeep to the gate before it
// stores a depth past 255 over one of at most 255, and subtracts it after it stores a depth of
// at most 255 over one past 255, each with one signal-atomic add (gate_add). So at every
// instruction a depth past 255 has kGateDeep counted in the gate, and the inline record paths,
// which write only through an exactly open gate, never test the depth themselves. A count, not
// a bit: a signal handler that runs between the add and the depth's store (or between the store
// and the subtract) and crosses 255 itself adds and subtracts its own kGateDeep, where a bit it
// set and cleared would clear the interrupted code's. Handlers end balanced, so the count is at
// most the number of nested handlers caught mid-crossing plus one (far below 8); a carry past bit
// 23 would still leave the gate closed. The inline paths never cross 255 (Span's begins inline
// below kOpenSpanMax, and ends inline only through an open gate), so code built with headers
// that know no kGateDeep runs unchanged: a deep thread's gate is simply not open to it.
// A zero-filled state (no ring) is closed. The vfork wrapper's assembly (src/vfork_*.S) uses
// kGateVfork's value and gate_'s offset in ThreadState (both static_assert'ed there).
inline constexpr uint32_t kGateOpen = 1u << 16;
inline constexpr uint32_t kGateBusy = 1u << 17;
inline constexpr uint32_t kGateVfork = 1u << 18;
inline constexpr uint32_t kGateGap = 1u << 19;
inline constexpr uint32_t kGateClock = 1u << 20;
inline constexpr uint32_t kGateDeep = 1u << 21;
inline constexpr uint32_t kGateDeepMask = 7u << 21;
// The deepest depth a CompactRecord's one depth byte holds.
inline constexpr uint32_t kDepthCompactMax = 0xff;

// The owner thread's end of one ring. Hot path: every method is noexcept, makes no syscall,
// takes no lock, allocates nothing, and touches only the ring's slots and producer line (the
// drainer's line only when the ring looks full). Owner thread only (a signal handler of the
// owner must not call it while the owner is inside a write: the producer guards that).
//
// Zero-initialised it is detached, which is how it starts in a thread's state.
//
// Hidden: each library that writes records inlines its own copy (never a call through the PLT).
class SPANRING_HIDDEN RingWriter {
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
    room_last_ = shared->tail.load(std::memory_order_relaxed) + mask_;
    seq_off_ = 0 - own_head_;  // sequence number 0 at head
    text_last_ = own_head_ - 1;  // unknown: the first text record computes it (text_room)
    gate_ &= ~kGateGap;
    shared->drops.store(0, std::memory_order_relaxed);
  }
  // ---- the gate (kGateOpen above; thread_state.h's functions use these)
  uint32_t gate() const noexcept { return gate_; }
  static constexpr size_t gate_offset() noexcept { return offsetof(RingWriter, gate_); }
  // The attach generation of the claimed ring (epoch_): the current one while the gate is open.
  uint32_t epoch() const noexcept { return epoch_; }
  // The gate in the low 32 bits and epoch_ in the high 32, one load (little-endian).
  uint64_t gate_word() const noexcept {
    static_assert(offsetof(RingWriter, epoch_) == offsetof(RingWriter, gate_) + 4 &&
                  __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
    uint64_t w;
    std::memcpy(&w, &gate_, 8);
    return w;
  }
  // Whether gate_word() is `word`: one compare of the word in memory with `word` (x86-64: a
  // `cmpq` with the result from the flags, where a load into a register came first), for a
  // caller that holds `word` in a register already. An aligned 8-byte read, as gate_word's.
  bool gate_word_is(uint64_t word) const noexcept {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    static_assert(offsetof(RingWriter, epoch_) == offsetof(RingWriter, gate_) + 4 &&
                  offsetof(RingWriter, gate_) % 8 == 0);
    // may_alias: the asm reads gate_ and epoch_ as one 8-byte operand.
    typedef uint64_t __attribute__((may_alias)) Word;
    bool same;
    asm("cmpq %2, %1"
        : "=@cce"(same)
        : "m"(*reinterpret_cast<const Word*>(&gate_)), "r"(word));
    return same;
#else
    return gate_word() == word;
#endif
  }
  // Sets the thread's bits `bits` (not kGateGap's: this writer's) with one signal-atomic
  // read-modify-write: a signal handler of this thread that changes the gate meanwhile (its
  // record drops: kGateGap) runs wholly before or after it. x86-64: one `or` to memory (an
  // instruction is never split by a signal; no lock prefix: no other thread writes the word).
  // Elsewhere: a relaxed atomic fetch_or (aarch64: LL/SC or LSE), atomic against the handler.
  __attribute__((always_inline)) void gate_or(uint32_t bits) noexcept {
#if defined(__x86_64__)
    asm volatile("orl %1, %0" : "+m"(gate_) : "ri"(bits));
#else
    // relaxed: the only other writers are this thread's signal handlers.
    __atomic_fetch_or(&gate_, bits, __ATOMIC_RELAXED);
#endif
  }
  // Sets the gate from `expected` to `desired` when it is `expected`, with one signal-atomic
  // compare-and-exchange (a signal handler of this thread runs wholly before or after it);
  // returns whether it did. x86-64: one `cmpxchg` to memory without a lock prefix (no other
  // thread writes the word). Elsewhere: a relaxed atomic compare-exchange.
  __attribute__((always_inline)) bool gate_cas(uint32_t expected, uint32_t desired) noexcept {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    bool done;
    asm volatile("cmpxchgl %3, %1"
                 : "=@ccz"(done), "+m"(gate_), "+a"(expected)
                 : "r"(desired));
    return done;
#else
    // relaxed: the only other writers are this thread's signal handlers.
    return __atomic_compare_exchange_n(&gate_, &expected, desired, false, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
#endif
  }
  // Sets the gate word (gate_word: the gate and epoch_) from `expected` to `desired` when it is
  // `expected`, as gate_cas does the gate alone: one signal-atomic compare-and-exchange, so
  // the epoch and the gate are tested and kGateBusy set in one instruction (emit's site test,
  // enter_site_busy). x86-64 only: one `cmpxchgq` without a lock prefix over gate_ and epoch_
  // (no other thread writes either); elsewhere the caller tests and sets in two steps.
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  __attribute__((always_inline)) bool gate_word_cas(uint64_t expected,
                                                    uint64_t desired) noexcept {
    static_assert(offsetof(RingWriter, epoch_) == offsetof(RingWriter, gate_) + 4 &&
                  __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
    bool done;
    // The memory operand is gate_ read and written as 8 bytes: epoch_ is named as a second
    // operand so that the compiler knows it is read and written too.
    asm volatile("cmpxchgq %4, %1"
                 : "=@ccz"(done), "+m"(gate_), "+m"(epoch_), "+a"(expected)
                 : "r"(desired));
    return done;
  }
#endif
  // Adds `n` (kGateDeep or its negation) to the gate with one signal-atomic read-modify-write,
  // as gate_or: x86-64 one `add` to memory; elsewhere a relaxed atomic fetch_add. The count
  // kGateDeep keeps (see above) only ever goes up and down by one, in bits of its own.
  __attribute__((always_inline)) void gate_add(uint32_t n) noexcept {
#if defined(__x86_64__)
    asm volatile("addl %1, %0" : "+m"(gate_) : "ri"(n) : "cc");
#else
    // relaxed: the only other writers are this thread's signal handlers.
    __atomic_fetch_add(&gate_, n, __ATOMIC_RELAXED);
#endif
  }
  // Clears `bits` while kGateBusy is set (or bits that only the owner sets while no handler
  // can change the gate, see gate_): a plain read-modify-write.
  void gate_clear(uint32_t bits) noexcept { gate_ &= ~bits; }
  // Stores `gate` whole: only where the caller knows every bit (kGateBusy set by it, so no
  // handler changes the word meanwhile).
  void set_gate(uint32_t gate) noexcept { gate_ = gate; }
  // Sets the gate to `gate` (kGateBusy, kGateVfork and the kGateDeep count kept as they are)
  // and the epoch: the ring was claimed (under kGateBusy) in attach generation `epoch`.
  void open_gate(uint32_t gate, uint32_t epoch) noexcept {
    gate_ = (gate_ & (kGateBusy | kGateVfork | kGateDeepMask)) | gate;
    epoch_ = epoch;
  }

  // Forgets the ring (thread exit hands it to the drainer; a fork child must not write into
  // its parent's ring) and closes the gate (no ring: 0 but for the kGateDeep count, which
  // follows the thread's depth, kept by a fork child). The ring itself is not touched.
  void detach() noexcept {
    shared_ = nullptr;
    gate_ &= kGateDeepMask;
  }

  RingHeader* shared() const noexcept { return shared_; }  // null while detached
  uint64_t capacity() const noexcept { return mask_ + 1; }  // slots

  // Writes one record and publishes it (release of head): `name_len` raw name bytes and
  // `attrs_len` raw attribute bytes (their sum at most kNameRawMax + kAttrsPackedMax), the
  // header fields as given, the next sequence number. When the ring has no room the record is
  // dropped whole, counted (drops, release) and its sequence number skipped; returns false.
  // Always inlined: a call would pass 10 arguments, half of them on the stack.
  __attribute__((always_inline)) bool write(const char* name, uint32_t name_len,
                                            const char* attrs, uint32_t attrs_len, uint64_t ts,
                                            uint64_t dur, uint64_t inv, uint64_t hid,
                                            uint32_t depth, uint16_t flags) noexcept {
    const uint32_t need = record_slots(name_len + attrs_len);
    if (!has_room(need)) {
      count_drops(1);
      return false;
    }
    // The writer's fields in locals: the payload stores below could alias them (char), and
    // would make every one be reloaded.
    const uint64_t head = own_head_;
    std::byte* const slots = slots_;
    const uint64_t mask = mask_;
    std::byte* first = slots + (head & mask) * kSlotBytes;
    const uint64_t off = put_header(first, ts, dur, inv, hid, depth, name_len, attrs_len, need,
                                    flags, head);
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
    seq_off_ = off + 1 - need;
    gate_ &= ~kGateGap;
    own_head_ = head + need;
    // release: the record's bytes are visible to the drainer's acquire of head.
    shared_->head.store(head + need, std::memory_order_release);
    prefetch_after(slots, mask, head + need, need);
    return true;
  }

  // The text record path of the library (the C ABI's record_any), which measures its strings
  // while it copies them into the ring: the slots a record of any name and attributes may
  // take, plus one for the copy's overshoot (it stores 16 bytes at a time, up to 15 bytes past
  // the last one it keeps: at most kNameRawMax + kAttrsRawMax + 15 payload bytes), 6.
  static constexpr uint32_t kTextRoomSlots = record_slots(kNameRawMax + kAttrsRawMax + 15);
  static_assert(kTextRoomSlots == 6 && kTextRoomSlots <= kMinRingCapacity);

  // text_room(): whether kTextRoomSlots slots from head are free and do not wrap around the
  // ring's end; false: the caller takes write(). After it said true, the caller may store
  // anything in the kInlinePayloadBytes + (kTextRoomSlots - 1) * kSlotBytes bytes from
  // text_payload(), the payload of the record at head, and publish what it stored with
  // commit_text(). One compare of head with text_last_ (a cache of the last head position
  // where both hold); only when that fails, text_room_slow computes it again.
  bool text_room() noexcept {
    if (__builtin_expect(static_cast<int64_t>(text_last_ - own_head_) >= 0, 1)) return true;
    return text_room_slow();
  }
  char* text_payload() const noexcept {
    return reinterpret_cast<char*>(slot(own_head_) + offsetof(RecordHeader, payload));
  }

  // Publishes (release of head) the record whose payload the caller stored at `payload`, the
  // pointer text_payload() returned: `name_len` name bytes then `attrs_len` attribute bytes
  // (their sum at most kNameRawMax + kAttrsRawMax), the header fields as given, the next
  // sequence number. Call only after text_room() said true, with no other write in between.
  // The record's slot is found from `payload`, not from head again: the caller's payload stores
  // (char) may alias this writer's fields, which would be reloaded.
  __attribute__((always_inline)) void commit_text(char* payload, uint32_t name_len,
                                                  uint32_t attrs_len, uint64_t ts, uint64_t dur,
                                                  uint64_t inv, uint64_t hid, uint32_t depth,
                                                  uint16_t flags) noexcept {
    const uint32_t need = record_slots(name_len + attrs_len);
    const uint64_t head = own_head_;
    const uint64_t off =
        put_header(reinterpret_cast<std::byte*>(payload - offsetof(RecordHeader, payload)), ts,
                   dur, inv, hid, depth, name_len, attrs_len, need, flags, head);
    seq_off_ = off + 1 - need;
    gate_ &= ~kGateGap;
    own_head_ = head + need;
    // release: the record's bytes are visible to the drainer's acquire of head.
    shared_->head.store(head + need, std::memory_order_release);
    prefetch_after(slots_, mask_, head + need, need);
  }

  // Whether the next record may be a CompactRecord: no record was dropped since the last one
  // written. A compact record carries only the low 32 bits of its sequence number, so the
  // drainer must know it from the record before (the first record after a drop is ordinary).
  bool compact_allowed() const noexcept { return (gate_ & kGateGap) == 0; }

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
    uint64_t v[2];
    std::memcpy(v, values, 16);
    put_compact(ts, inv, hid, v[0], v[1], dur, flags, name, keys, depth, attrs);
    return true;
  }

  // Whether a one-slot record fits now (what write_compact tests first). For the inline record
  // path of span.h, which tests it before it reads the record's fields: the drainer's tail, when
  // it must be reread, is an acquire load that later loads may not move above, so fields read
  // before it would be held (spilled) across it.
  bool room_for_compact() noexcept { return has_room(1); }
  // room_for_compact() that also sets `head` to the position the record goes to (own_head_,
  // read once), for a caller that passes it on to put_compact_words: the room test and the
  // slot's address use one load of it (SPANRING_EMIT's record: -1 instruction; Span's and
  // emit()'s records measured 1-3 more with it, GCC's register choices).
  bool room_for_compact(uint64_t& head) noexcept {
    head = own_head_;
    if (room_at(head, 1)) return true;
    // acquire: as in has_room.
    room_last_ = shared_->tail.load(std::memory_order_acquire) + mask_;
    return room_at(head, 1);
  }

  // write_compact without the room test: call only right after room_for_compact() said true
  // (and when compact_allowed()). Writes and publishes the record. The 4 values as two words,
  // value 2i in the low half of word i (the record's little-endian layout): values the caller
  // holds in registers stay there (no array whose address would be taken).
  // Returns the ring's header (shared()), which the caller's next store to it (a span's end
  // lowers open_depth) then takes from a register instead of loading it again.
  __attribute__((always_inline)) RingHeader* put_compact(uint64_t ts, uint64_t inv, uint64_t hid,
                                                         uint64_t values01, uint64_t values23,
                                                         uint32_t dur, uint16_t flags,
                                                         uint16_t name, uint64_t keys,
                                                         uint8_t depth, uint8_t attrs) noexcept {
    // slots = 1, flags, name, keys[0]; then keys[1..3], depth, attrs (little-endian, x86-64)
    return put_compact_words(own_head_, ts, inv, hid, values01, values23, dur,
                             compact_word6(flags, name, keys),
                             keys >> 16 | uint64_t{attrs} << 56, depth);
  }

  // A CompactRecord's word 6 (bytes 48..55): slots = 1, `flags`, `name`, keys[0] (the low 16
  // bits of `keys`). Constant for a call site whose name and keys are (SPANRING_EMIT's site
  // keeps it: span.h, EmitSite).
  static constexpr uint64_t compact_word6(uint16_t flags, uint16_t name, uint64_t keys) noexcept {
    return 1u | uint64_t{flags} << 16 | uint64_t{name} << 32 | keys << 48;
  }

  // put_compact with the record's last two words given (put_compact_words below), at own_head_,
  // and the 4 values as four 32-bit stores: for a caller that has word 6 and word 7 built
  // already (a Span's site keeps them) and holds the values in separate registers (two 64-bit
  // words of them took two shifts and two ORs).
  __attribute__((always_inline)) RingHeader* put_compact_words(
      uint64_t ts, uint64_t inv, uint64_t hid, uint32_t v0, uint32_t v1, uint32_t v2, uint32_t v3,
      uint32_t dur, uint64_t word6, uint64_t word7, uint8_t depth) noexcept {
    return put_compact_words(own_head_, ts, inv, hid, v0, v1, v2, v3, dur, word6, word7, depth);
  }

  // put_compact with the record's position `head` (own_head_, or what room_for_compact(head)
  // set) and its last two words given: `word6` (compact_word6) and `word7`
  // (keys[1..3], attrs: bytes 56..63) but for its depth byte (byte 62, which `word7` leaves 0),
  // `depth`, stored over it as one byte: a thread's depth is then a byte load and a byte store,
  // where putting it in the word took a shift and an OR more. Returns the ring's header, as
  // put_compact.
  __attribute__((always_inline)) RingHeader* put_compact_words(
      uint64_t head, uint64_t ts, uint64_t inv, uint64_t hid, uint64_t values01,
      uint64_t values23, uint32_t dur, uint64_t word6, uint64_t word7, uint8_t depth) noexcept {
    return put_compact_slot(head, ts, inv, hid, dur, word6, word7, depth, [&](std::byte* rec) {
      store_word(rec, 3, values01);
      store_word(rec, 4, values23);
    });
  }
  // put_compact_words with the 4 values as four 32-bit stores.
  __attribute__((always_inline)) RingHeader* put_compact_words(
      uint64_t head, uint64_t ts, uint64_t inv, uint64_t hid, uint32_t v0, uint32_t v1,
      uint32_t v2, uint32_t v3, uint32_t dur, uint64_t word6, uint64_t word7,
      uint8_t depth) noexcept {
    return put_compact_slot(head, ts, inv, hid, dur, word6, word7, depth, [&](std::byte* rec) {
      static_assert(offsetof(CompactRecord, values) == 24);
#if defined(__x86_64__)
      if (!(__builtin_constant_p(v0) && __builtin_constant_p(v1) && __builtin_constant_p(v2) &&
            __builtin_constant_p(v3))) {
        // Each value as its own `movl` from the register it is in: as plain stores, GCC's
        // vectorizer gathers the four into a vector register first (7 instructions for 3
        // stores' worth), and that vector's register then holds them across the span.
        uint32_t* const v = reinterpret_cast<uint32_t*>(rec + offsetof(CompactRecord, values));
        asm volatile("movl %1, %0" : "=m"(v[0]) : "r"(v0));
        asm volatile("movl %1, %0" : "=m"(v[1]) : "r"(v1));
        asm volatile("movl %1, %0" : "=m"(v[2]) : "r"(v2));
        asm volatile("movl %1, %0" : "=m"(v[3]) : "r"(v3));
        return;
      }
#endif
      // Constants (a span without attributes: zeros) merge into one store.
      std::memcpy(rec + offsetof(CompactRecord, values), &v0, 4);
      std::memcpy(rec + offsetof(CompactRecord, values) + 4, &v1, 4);
      std::memcpy(rec + offsetof(CompactRecord, values) + 8, &v2, 4);
      std::memcpy(rec + offsetof(CompactRecord, values) + 12, &v3, 4);
    });
  }

  // Publishes a kRecordReentrant marker: `n` records (1..kReentrantMarkerMax) a signal handler
  // emitted while this thread was inside write(); they take sequence numbers seq..seq+n-1.
  // When the ring is full they are counted as ring_full drops instead.
  void write_reentrant_marker(uint32_t n) noexcept {
    if (!has_room(1)) {
      count_drops(n);
      return;
    }
    put_header(slot(own_head_), 0, n, 0, 0, 0, 0, 0, 1, kRecordReentrant, own_head_);
    seq_off_ += n - 1;  // n sequence numbers, one slot
    gate_ &= ~kGateGap;  // the marker carries the whole sequence number
    own_head_ += 1;
    // release: the marker's bytes are visible to the drainer's acquire of head.
    shared_->head.store(own_head_, std::memory_order_release);
  }

 private:
  // The body of put_compact_words: the record at `head` but for its values, which
  // `store_values(rec)` stores (bytes 24..39).
  template <class StoreValues>
  __attribute__((always_inline)) RingHeader* put_compact_slot(uint64_t head, uint64_t ts,
                                                              uint64_t inv, uint64_t hid,
                                                              uint32_t dur, uint64_t word6,
                                                              uint64_t word7, uint8_t depth,
                                                              StoreValues store_values) noexcept {
    // The writer's fields in locals: the slot stores below cannot alias them then, so none is
    // reloaded; the record is 7 stores of 8 bytes, 2 of 4 and 1 of 1.
    // A one-slot record moves head and the sequence number by one each: seq_off_ stays.
    const uint64_t seq = head + seq_off_;
    std::byte* const slots = slots_;
    const uint64_t mask = mask_;
    std::byte* const rec = slots + (head & mask) * kSlotBytes;
    static_assert(offsetof(CompactRecord, seq_lo) == 44 && offsetof(CompactRecord, keys) == 54 &&
                  offsetof(CompactRecord, depth) == 62, "the words below follow this layout");
    store_word(rec, 0, ts);
    store_word(rec, 1, inv);
    store_word(rec, 2, hid);
    store_values(rec);
    // dur_ns and seq_lo as two 32-bit stores: one 64-bit word of them took a shift and an OR.
    const uint32_t seq_lo = static_cast<uint32_t>(seq);
    std::memcpy(rec + offsetof(CompactRecord, dur_ns), &dur, 4);
    std::memcpy(rec + offsetof(CompactRecord, seq_lo), &seq_lo, 4);
    store_word(rec, 6, word6);
    store_word(rec, 7, word7);
    std::memcpy(rec + offsetof(CompactRecord, depth), &depth, 1);
    own_head_ = head + 1;
    RingHeader* const shared = shared_;
    // release: the record's bytes are visible to the drainer's acquire of head.
    shared->head.store(head + 1, std::memory_order_release);
    prefetch_after(slots, mask, head + 1, 1);
    return shared;
  }

  // How far ahead of head prefetch_after() fetches slots for writing: 16 slots (1 KiB, a few
  // records), far enough that a line taken back from the drainer's core (~100 ns) arrives
  // before the record that needs it. In a ring of kMinRingCapacity slots it wraps onto the
  // slots just written, which costs nothing.
  static constexpr uint32_t kPrefetchSlots = 16;

  // Writes the ten header fields of the record at `rec` (an ordinary record or a marker) that
  // starts at position `head` (own_head_), its sequence number the next one (head + seq_off_),
  // and returns seq_off_ as read (the caller moves it on: seq_off_ += 1 - slots for one
  // sequence number, since head moves by `slots`): every writer of a RecordHeader goes through
  // here. The caller's values are stored first and seq_off_ is read last, so that each value's
  // register is free once it is stored.
  // `slots` and `flags` are adjacent 16-bit fields, stored as one 32-bit word (little-endian; a
  // constant flags folds into it).
  __attribute__((always_inline)) uint64_t put_header(std::byte* rec, uint64_t ts, uint64_t dur,
                                                     uint64_t inv, uint64_t hid, uint32_t depth,
                                                     uint32_t name_len, uint32_t attrs_len,
                                                     uint32_t slots, uint16_t flags,
                                                     uint64_t head) noexcept {
    static_assert(offsetof(RecordHeader, flags) == offsetof(RecordHeader, slots) + 2 &&
                  __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
    auto* h = reinterpret_cast<RecordHeader*>(rec);
    h->ts_ns = ts;
    h->dur_ns = dur;
    h->inv = inv;
    h->hid = hid;
    h->depth = depth;
    h->name_len = static_cast<uint16_t>(name_len);
    h->attrs_len = static_cast<uint16_t>(attrs_len);
    const uint32_t slots_flags = (slots & 0xffffu) | uint32_t{flags} << 16;
    std::memcpy(rec + offsetof(RecordHeader, slots), &slots_flags, 4);
    const uint64_t off = seq_off_;
    h->seq = head + off;
    return off;
  }

  static void store_word(std::byte* rec, uint32_t i, uint64_t v) noexcept {
    std::memcpy(rec + 8 * i, &v, 8);
  }

  std::byte* slot(uint64_t pos) const noexcept { return slots_ + (pos & mask_) * kSlotBytes; }

  // Whether `need` (1..capacity) slots from head are free as far as this writer knows: the
  // last of them, head + need - 1, is at or before room_last_. A difference of the counters
  // tested for its sign, so it stays right when they wrap past 2^64; for need 1 that is one
  // compare of head with room_last_ and a branch on the sign (where room_end_ - head > 0 took a
  // subtraction and a test).
  bool room_for(uint32_t need) const noexcept { return room_at(own_head_, need); }
  // room_for with head given (own_head_ as the caller read it).
  bool room_at(uint64_t head, uint32_t need) const noexcept {
    return static_cast<int64_t>(room_last_ - head - (need - 1)) >= 0;
  }

  // Whether `need` slots are free; rereads the drainer's tail only when the cached one says
  // the ring is full. The reread stays inline here: calling an out-of-line one instead cost
  // `Span` 197.8 -> 198.8 and `SPANRING_SPAN` 183.3 -> 188.3 Ir per record
  // (bench/ir-per-record, release).
  bool has_room(uint32_t need) noexcept {
    if (room_for(need)) return true;
    // acquire: pairs with the drainer's release of tail, made after it finished reading the
    // slots below tail, so our writes to them cannot race its reads.
    room_last_ = shared_->tail.load(std::memory_order_acquire) + mask_;
    return room_for(need);
  }

  // text_room's second half, out of line: the last head position from which kTextRoomSlots
  // slots are free (rereading the drainer's tail when the cached one says they are not) and
  // do not wrap (the last such position in head's lap, (head | mask) - (kTextRoomSlots - 1)),
  // kept in text_last_, and whether head is at or before it. Both bounds only grow as head and
  // the drainer's tail move on (until attach() takes another ring and resets text_last_), so a
  // text_last_ computed earlier is never past the true one: a stale one only costs this call.
  __attribute__((noinline)) bool text_room_slow() noexcept {
    const uint64_t head = own_head_;
    if (!room_for(kTextRoomSlots)) {
      // acquire: as in has_room.
      room_last_ = shared_->tail.load(std::memory_order_acquire) + mask_;
    }
    const uint64_t room = room_last_ - (kTextRoomSlots - 1);
    const uint64_t lap = (head | mask_) - (kTextRoomSlots - 1);
    // Both are within a capacity of head: their order is the sign of their difference.
    text_last_ = static_cast<int64_t>(room - lap) < 0 ? room : lap;
    return static_cast<int64_t>(text_last_ - head) >= 0;
  }

  // `n` records found the ring full: their sequence numbers are never published (a gap).
  void count_drops(uint64_t n) noexcept {
    seq_off_ += n;
    gate_ |= kGateGap;
    // relaxed load: only the owner writes drops (attach set it to 0). release: the drainer
    // pairs its acquire of drops with its acquire of head to attribute the gap.
    shared_->drops.store(shared_->drops.load(std::memory_order_relaxed) + n,
                         std::memory_order_release);
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
  // The last value read of shared_->tail (the drainer's) plus the capacity minus 1: the last
  // head position whose slot is free as far as this writer knows, so a room test is one
  // compare (room_for; modulo 2^64, as every counter).
  uint64_t room_last_;
  // The sequence number of the next record minus own_head_ (mod 2^64): a one-slot record
  // leaves it as it is (head and the number both move by one), so the compact record path
  // neither loads, increments nor stores a sequence number; a record of n slots subtracts
  // n - 1, a drop adds 1, a marker for n records adds n - 1.
  uint64_t seq_off_;
  // The last head position from which a text record's kTextRoomSlots slots are free and do
  // not wrap, as far as this writer knows (text_room; never past the true one).
  uint64_t text_last_;
  // The gate: 0 or bits at and above bit 16, exactly kGateOpen when the
  // caller's inline record path may run. This writer owns kGateGap; the thread state the
  // others. Read with epoch_ as one 64-bit word (gate_word). Owner thread and its signal
  // handlers only: it changes only by the owner while kGateBusy is clear, by one signal-atomic
  // read-modify-write (gate_or, as enter_busy sets kGateBusy; gate_add, the kGateDeep count,
  // whose handlers' changes are balanced by the time the interrupted code resumes), and by the
  // vfork wrapper
  // (src/vfork_*.S: one signal-atomic or/and of kGateVfork, set and cleared around the child).
  uint32_t gate_;
  // The attach generation (g_attach_generation) of the segment this thread's ring belongs to,
  // set when the ring is claimed; compared by SPANRING_SPAN's site word (span.h) in the same
  // 64-bit load as the gate.
  uint32_t epoch_;
};

}  // namespace spanring
