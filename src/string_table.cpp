// The segment's string table: intern (producer) and StringTableReader (drainer). See
// src/string_table.h and segment_layout.h (StringEntry) for the protocol.
#include "src/string_table.h"

#include <spanring/test_point.h>

#include <cstring>
#include <string>

namespace spanring {
namespace {

static_assert((kStringTableEntries & (kStringTableEntries - 1)) == 0, "a power of two");
constexpr uint32_t kMask = kStringTableEntries - 1;

// Ids start at 1 (id 0 means "no string"): the probe skips entry 0.
uint32_t probe(uint32_t hash, uint32_t i) noexcept {
  const uint32_t at = (hash + i) & kMask;
  return at == 0 ? 1 : at;
}

}  // namespace

uint16_t intern(StringEntry* table, const char* bytes, uint32_t len,
                std::atomic<uint64_t>* strings_full) noexcept {
  if (len == 0 || len > kStringMaxBytes || std::memchr(bytes, 0, len) != nullptr) return 0;
  const uint32_t hash = string_hash(bytes, len);
  for (uint32_t i = 0; i < kStringProbeMax; ++i) {
    const uint32_t at = probe(hash, i);
    StringEntry& e = table[at];
    // acquire: pairs with the writer's release of kStringReady; its hash, len and bytes are
    // then complete.
    uint32_t state = e.state.load(std::memory_order_acquire);
    if (state == kStringEmpty) {
      // acquire (success and failure): taking the entry publishes nothing (the release of
      // kStringReady does), but a failed CAS reads another producer's state, and an entry found
      // kStringReady is then read. (GCC 12 rejects a failure order stronger than success.)
      if (e.state.compare_exchange_strong(state, kStringWriting, std::memory_order_acquire,
                                          std::memory_order_acquire)) {
        e.hash = hash;
        e.len = len;
        e.writer_pid = 0;
        std::memcpy(e.bytes, bytes, len);
        // A test can kill the producer here: the entry stays kStringWriting for good.
        SPANRING_TEST_POINT("string_writing");
        // release: hash, len and bytes are visible to whoever acquires kStringReady.
        e.state.store(kStringReady, std::memory_order_release);
        return static_cast<uint16_t>(at);
      }
      // Another producer took it meanwhile: `state` now holds what it found (acquire).
    }
    if (state == kStringReady && e.hash == hash && e.len == len &&
        std::memcmp(e.bytes, bytes, len) == 0)
      return static_cast<uint16_t>(at);
    // kStringWriting (being written, or its writer died) or another string: probe on.
  }
  // relaxed: a report counter.
  if (strings_full != nullptr) strings_full->fetch_add(1, std::memory_order_relaxed);
  return 0;
}

namespace {

// One ready entry copied out of shared memory once, then checked on the copy. Returns the
// length (1..kStringMaxBytes) or 0 with the reason in `why` (when non-null).
uint32_t copy_checked(const StringEntry& e, uint32_t id, char (&bytes)[kStringMaxBytes],
                      std::string* why) {
  const uint32_t hash = e.hash;
  const uint32_t len = e.len;
  std::memcpy(bytes, e.bytes, sizeof bytes);
  if (len == 0 || len > kStringMaxBytes) {
    if (why != nullptr)
      *why = "string id " + std::to_string(id) + " has length " + std::to_string(len) +
             " (1.." + std::to_string(kStringMaxBytes) + ")";
    return 0;
  }
  if (std::memchr(bytes, 0, len) != nullptr) {
    if (why != nullptr) *why = "string id " + std::to_string(id) + " holds a NUL byte";
    return 0;
  }
  if (string_hash(bytes, len) != hash) {
    if (why != nullptr) *why = "string id " + std::to_string(id) + " does not match its hash";
    return 0;
  }
  return len;
}

}  // namespace

bool StringTableReader::resolve_entry(uint32_t id, std::string_view& out, std::string& why) {
  if (id == 0 || id >= kStringTableEntries) {
    why = "string id " + std::to_string(id) + " is outside the table (1.." +
          std::to_string(kStringTableEntries - 1) + ")";
    return false;
  }
  if (table_ == nullptr) {
    why = "string id " + std::to_string(id) + " but no string table to resolve it in";
    return false;
  }
  const StringEntry& e = table_[id];
  // acquire: pairs with the writer's release of kStringReady. A record naming this id was
  // published (release of head, acquired by the drainer) after its producer saw the entry
  // ready, so a ready entry is complete here.
  const uint32_t state = e.state.load(std::memory_order_acquire);
  if (state != kStringReady) {
    why = "string id " + std::to_string(id) + " names an entry that is not ready (state " +
          std::to_string(state) + ")";
    return false;
  }
  char bytes[kStringMaxBytes];
  const uint32_t len = copy_checked(e, id, bytes, &why);
  if (len == 0) return false;
  if (!lens_) {
    lens_ = std::make_unique<uint8_t[]>(kStringTableEntries);
    bytes_ = std::make_unique_for_overwrite<char[]>(size_t{kStringTableEntries} * kStringMaxBytes);
  }
  char* const kept = bytes_.get() + size_t{id} * kStringMaxBytes;
  std::memcpy(kept, bytes, len);
  lens_[id] = static_cast<uint8_t>(len);
  ++resolved_;
  out = std::string_view(kept, len);
  return true;
}

StringTableUsage string_table_usage(const StringEntry* table) noexcept {
  StringTableUsage u;
  for (uint32_t id = 0; id < kStringTableEntries; ++id) {
    // acquire: pairs with the writer's release of kStringReady (then the copy is complete).
    const uint32_t state = table[id].state.load(std::memory_order_acquire);
    if (state == kStringEmpty) continue;
    if (id == 0) {
      ++u.corrupt;  // never taken by intern(): written by something else
    } else if (state == kStringWriting) {
      ++u.writing;
    } else if (state == kStringReady) {
      char bytes[kStringMaxBytes];
      if (copy_checked(table[id], id, bytes, nullptr) != 0) ++u.ready;
      else ++u.corrupt;
    } else {
      ++u.corrupt;
    }
  }
  return u;
}

}  // namespace spanring
