// RingReader (src/ring.h): its out-of-line parts (a bad head, compact records), and the slot
// copies of the run path. read() itself is inline in ring.h.
#include "src/ring.h"

#include "src/record_decode.h"

#include <charconv>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace spanring {

namespace {

// Copies `n` whole slots: 64 bytes each, no alignment assumed.
using SlotCopy = void (*)(std::byte* out, const std::byte* in, uint64_t n) noexcept;

void copy_memcpy(std::byte* out, const std::byte* in, uint64_t n) noexcept {
  std::memcpy(out, in, n * kSlotBytes);
}

#if defined(__x86_64__)
// Two slots a turn in four 32-byte registers: 4.5 instructions a slot, where the 8-byte
// `rep movsq` is 8 iterations (what callgrind counts, and what a CPU without fast string moves
// for short copies pays).
[[gnu::target("avx2")]] void copy_avx2(std::byte* out, const std::byte* in,
                                       uint64_t n) noexcept {
  static_assert(kSlotBytes == 64);
  uint64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const std::byte* s = in + i * kSlotBytes;
    std::byte* d = out + i * kSlotBytes;
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  if (i < n) {
    const std::byte* s = in + i * kSlotBytes;
    std::byte* d = out + i * kSlotBytes;
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32), b);
  }
}

SlotCopy pick_slot_copy() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? copy_avx2 : copy_memcpy;
}
#else
SlotCopy pick_slot_copy() noexcept { return copy_memcpy; }
#endif

// Chosen once, at the first use (a function-local static: thread-safe initialisation).
SlotCopy slot_copy() noexcept {
  static const SlotCopy copy = pick_slot_copy();
  return copy;
}

}  // namespace

void RingReader::copy_slots(uint64_t from, uint64_t n, std::byte* out) const noexcept {
  const uint64_t mask = capacity_ - 1;
  const uint64_t first = (position_ + from) & mask;
  const uint64_t to_end = capacity_ - first;
  const uint64_t a = n < to_end ? n : to_end;
  const SlotCopy copy = slot_copy();
  copy(out, slots_ + first * kSlotBytes, a);
  if (n > a) copy(out + a * kSlotBytes, slots_, n - a);
}

std::optional<uint64_t> RingReader::count_records(uint64_t head) const noexcept {
  const uint64_t mask = capacity_ - 1;
  uint64_t records = 0;
  for (uint64_t pos = position_; pos != head; ++records) {
    RecordHeader h;
    std::memcpy(&h, slots_ + (pos & mask) * kSlotBytes, sizeof h);  // one read of shared memory
    if (h.slots == 0 || h.slots > kMaxRecordSlots || h.slots > head - pos) return std::nullopt;
    pos += h.slots;
  }
  return records;
}

ReadStatus RingReader::bad_head(uint64_t head, std::string& why) const {
  why = "head " + std::to_string(head) + " is not within one ring of the read position " +
        std::to_string(position_);
  return ReadStatus::kCorrupt;
}

ReadStatus RingReader::read_compact(uint64_t pos, uint64_t min_seq, RecordCopy& out,
                                    std::string& why) {
  CompactRecord c;
  std::memcpy(&c, &out.header, sizeof c);  // the private copy read() made, reinterpreted
  // Framing first: anything wrong there is ring corruption (the reader cannot know what
  // follows). It directly follows the ring's previous record: its sequence number is the next
  // expected one.
  if (!check_compact_frame(c, min_seq, true, RecordWhere{"compact record at slot ", pos},
                           why))
    return ReadStatus::kCorrupt;
  position_ = pos + 1;  // consumed, whether its strings resolve or not
  auto resolve = [this](uint32_t id, std::string_view& bytes, std::string& w) {
    if (strings_ == nullptr) {
      w = "no string table to resolve id " + std::to_string(id);
      return false;
    }
    return strings_->resolve(id, bytes, w);
  };
  if (!decode_compact(c, min_seq, resolve, out,
                      RecordWhere{"compact record seq ", min_seq, " at slot ", pos},
                      why))
    return ReadStatus::kBadString;
  return ReadStatus::kRecord;
}

}  // namespace spanring
