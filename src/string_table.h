// The segment's string table (segment_layout.h, StringEntry): interning on the producer side,
// validated resolution on the drainer side. Not installed.
//
// Producer: intern() maps bytes to a string id, taking an empty entry the first time a string
// is seen in the segment. Every process and thread shares the table, so a string has one id in
// the segment whichever process registered it. Callers cache ids (src/span.cpp) so that a
// string is interned once per process, not per record.
//
// Drainer: StringTableReader resolves an id found in a record or an open span, treating the
// table as untrusted shared memory: it reads each entry once, checks it, and keeps the checked
// copy, so an entry rewritten later (by a buggy or hostile process) cannot change what the
// drainer already resolved, and cannot make it read outside the table.
#pragma once

#include <spanring/segment_layout.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace spanring {

// The id of `bytes[0, len)` in `table` (kStringTableEntries entries), inserting it when it is
// not there. Any thread of any producer; lock-free (at most kStringProbeMax entries probed, one
// CAS each at most), no syscall, no allocation, async-signal-safe. Returns 0 when the string
// cannot be interned: len 0 or > kStringMaxBytes, a NUL byte inside it, or no empty entry within
// the probe limit (then `strings_full`, when non-null, is incremented, relaxed). Two producers
// inserting the same string at once may each take an entry: a string may have more than one
// id; every id of it resolves to the same bytes.
uint16_t intern(StringEntry* table, const char* bytes, uint32_t len,
                std::atomic<uint64_t>* strings_full) noexcept;

// Drainer side: resolves ids against one segment's table. Drainer thread only (not
// thread-safe); holds up to kStringTableEntries checked copies (at most ~80 bytes each).
class StringTableReader {
 public:
  StringTableReader() = default;
  explicit StringTableReader(const StringEntry* table) : table_(table) {}

  // The raw bytes of string `id` (1..kStringMaxBytes bytes), valid as long as this reader. On
  // failure returns false and says why in `why` (id 0 or out of range, entry not ready, length
  // out of range, NUL byte, hash mismatch): the caller treats the record naming it as corrupt.
  // The first successful resolution of an id is kept: later calls return the same bytes.
  bool resolve(uint32_t id, std::string_view& out, std::string& why);

 private:
  const StringEntry* table_ = nullptr;
  std::unique_ptr<std::string[]> cache_;  // lazily allocated, kStringTableEntries; "" = unknown
};

}  // namespace spanring
