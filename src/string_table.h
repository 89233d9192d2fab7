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
// thread-safe); holds up to kStringTableEntries checked copies (kStringMaxBytes + 1 bytes each,
// ~260 KiB, allocated at the first resolution, never per record).
class StringTableReader {
 public:
  StringTableReader() = default;
  // `table`: kStringTableEntries entries (SegmentView::strings()), or null: then every id fails.
  explicit StringTableReader(const StringEntry* table) : table_(table) {}

  // The raw bytes of string `id` (1..kStringMaxBytes bytes), valid as long as this reader. On
  // failure returns false and says why in `why` (id 0 or out of range, no table, entry not
  // ready, length out of range, NUL byte, hash mismatch): the caller treats the record naming
  // it as corrupt. The first successful resolution of an id is kept: later calls return the
  // same bytes without reading the table again (the per-record path: a range check and a
  // load). A failure is not kept: the entry is read again next time.
  bool resolve(uint32_t id, std::string_view& out, std::string& why) {
    if (id < kStringTableEntries && lens_ != nullptr && lens_[id] != 0) {
      out = std::string_view(bytes_.get() + size_t{id} * kStringMaxBytes, lens_[id]);
      return true;
    }
    return resolve_entry(id, out, why);
  }

  // Ids resolved so far (checked copies kept).
  uint32_t resolved() const noexcept { return resolved_; }

 private:
  static_assert(kStringMaxBytes <= 255, "a length is one byte");

  // Reads entry `id` from shared memory once, checks the copy, keeps it.
  bool resolve_entry(uint32_t id, std::string_view& out, std::string& why);

  const StringEntry* table_ = nullptr;
  // Checked copies by id, allocated once: lens_ (zeroed; 0: not resolved yet) and bytes_
  // (kStringMaxBytes per id, not zeroed: only the first lens_[id] bytes of an id are read, so
  // the ~260 KiB are never all touched).
  std::unique_ptr<uint8_t[]> lens_;
  std::unique_ptr<char[]> bytes_;
  uint32_t resolved_ = 0;
};

// What a walk over a whole table finds (spanring stat). Reads each entry's state (acquire) and,
// for a ready entry, checks a private copy as the drainer would; corrupt entries are counted,
// never followed.
struct StringTableUsage {
  uint32_t ready = 0;    // kStringReady entries that check out (length, no NUL, hash)
  uint32_t writing = 0;  // kStringWriting: being written, or left mid-write by a killed producer
  uint32_t corrupt = 0;  // any other state, or a ready entry that does not check out (id 0 too
                         // when it is not empty: no producer writes it)
};
StringTableUsage string_table_usage(const StringEntry* table) noexcept;

}  // namespace spanring
