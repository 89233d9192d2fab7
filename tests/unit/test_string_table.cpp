// The segment's string table (src/string_table.h): intern() on the producer side,
// StringTableReader::resolve() and string_table_usage() on the drainer side, which treat the
// table as untrusted shared memory.
#include <doctest/doctest.h>

#include "src/string_table.h"

#include <spanring/segment_layout.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace spanring;

namespace {

// A zero-filled table of kStringTableEntries entries, as a fresh segment has it.
struct Table {
  std::unique_ptr<StringEntry[]> entries{new StringEntry[kStringTableEntries]()};
  std::atomic<uint64_t> full{0};
  StringEntry* get() { return entries.get(); }
  uint16_t intern(const std::string& s) {
    return spanring::intern(get(), s.data(), static_cast<uint32_t>(s.size()), &full);
  }
};

// Distinct strings of 1..kStringMaxBytes bytes, derived from n.
std::string string_for(uint32_t n) {
  std::string s = "s" + std::to_string(n) + ".";
  const size_t len = 1 + (n * 11) % kStringMaxBytes;
  while (s.size() < len) s += static_cast<char>('a' + (n + s.size()) % 26);
  return s;  // longer than len when the number itself is: still <= kStringMaxBytes
}

std::string resolved(StringTableReader& reader, uint32_t id) {
  std::string_view out;
  std::string why;
  REQUIRE_MESSAGE(reader.resolve(id, out, why), why);
  return std::string(out);
}

// Writes a ready entry by hand (as intern would, or as a hostile process might).
void put_entry(StringEntry& e, uint32_t state, const std::string& bytes, uint32_t hash,
               uint32_t len) {
  e.hash = hash;
  e.len = len;
  std::memset(e.bytes, 0, sizeof e.bytes);
  std::memcpy(e.bytes, bytes.data(), std::min<size_t>(bytes.size(), sizeof e.bytes));
  e.state.store(state, std::memory_order_release);
}

}  // namespace

TEST_CASE("intern gives one id per string, the same id again for the same bytes, and resolve gives the bytes back") {
  Table t;
  StringTableReader reader(t.get());
  std::vector<uint16_t> ids;
  std::set<uint16_t> distinct;
  for (uint32_t n = 0; n < 300; ++n) {
    const uint16_t id = t.intern(string_for(n));
    REQUIRE(id != 0);
    CHECK(id < kStringTableEntries);
    ids.push_back(id);
    distinct.insert(id);
  }
  CHECK(distinct.size() == ids.size());
  for (uint32_t n = 0; n < 300; ++n) {
    CHECK(t.intern(string_for(n)) == ids[n]);  // found, not inserted again
    CHECK(resolved(reader, ids[n]) == string_for(n));
    CHECK(resolved(reader, ids[n]) == string_for(n));  // cached: the same bytes
    CHECK(t.get()[ids[n]].state.load() == kStringReady);
  }
  CHECK(reader.resolved() == 300);
  CHECK(t.full.load() == 0);
  // A string of exactly kStringMaxBytes is interned; one byte more is not (and is not "full").
  const std::string longest(kStringMaxBytes, 'x');
  const uint16_t id = t.intern(longest);
  REQUIRE(id != 0);
  CHECK(resolved(reader, id) == longest);
  CHECK(t.intern(std::string(kStringMaxBytes + 1, 'x')) == 0);
  CHECK(t.intern(std::string()) == 0);
  CHECK(t.intern(std::string("a\0b", 3)) == 0);  // a NUL byte: never interned
  CHECK(t.full.load() == 0);
  CHECK(t.get()[0].state.load() == kStringEmpty);  // id 0 is never used
}

TEST_CASE("threads interning the same strings at once all get ids that resolve to their bytes") {
  Table t;
  constexpr uint32_t kThreads = 8;
  constexpr uint32_t kStrings = 400;
  std::vector<std::vector<uint16_t>> ids(kThreads, std::vector<uint16_t>(kStrings));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (uint32_t th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      std::vector<uint32_t> order(kStrings);
      for (uint32_t i = 0; i < kStrings; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(th));
      while (!go.load(std::memory_order_acquire)) {
      }
      for (const uint32_t n : order) ids[th][n] = t.intern(string_for(n));
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& th : threads) th.join();
  StringTableReader reader(t.get());
  std::set<uint16_t> taken;
  for (uint32_t th = 0; th < kThreads; ++th) {
    for (uint32_t n = 0; n < kStrings; ++n) {
      REQUIRE(ids[th][n] != 0);
      CHECK(resolved(reader, ids[th][n]) == string_for(n));
      taken.insert(ids[th][n]);
    }
  }
  // Racing inserts may give a string a second entry, never a string's id to another string
  // (checked above); and every entry taken is ready (no writer was killed).
  CHECK(taken.size() >= kStrings);
  const StringTableUsage usage = string_table_usage(t.get());
  CHECK(usage.writing == 0);
  CHECK(usage.corrupt == 0);
  CHECK(usage.ready >= taken.size());
  CHECK(t.full.load() == 0);
  // After the race, a lookup finds an id of the string (the first ready one on its probe path).
  for (uint32_t n = 0; n < kStrings; ++n) CHECK(resolved(reader, t.intern(string_for(n))) == string_for(n));
}

TEST_CASE("a table with no room within the probe limit gives 0 and counts strings_full") {
  Table t;
  StringTableReader reader(t.get());
  uint64_t zeros = 0;
  std::vector<std::pair<uint16_t, uint32_t>> ok;
  for (uint32_t n = 0; n < 3 * kStringTableEntries; ++n) {
    const uint16_t id = t.intern(string_for(n));
    if (id == 0) ++zeros;
    else ok.emplace_back(id, n);
  }
  CHECK(zeros > 0);
  CHECK(t.full.load() == zeros);
  CHECK(ok.size() <= kStringTableEntries - 1);
  for (const auto& [id, n] : ok) CHECK(resolved(reader, id) == string_for(n));
  // Strings already in keep their ids in the full table; new ones are refused, counted.
  CHECK(t.intern(string_for(ok.front().second)) == ok.front().first);
  const uint64_t before = t.full.load();
  CHECK(t.intern("a string never seen") == 0);
  CHECK(t.full.load() == before + 1);

  // A table whose entries were all left mid-write (killed producers) is full in the same way.
  Table stuck;
  for (uint32_t i = 0; i < kStringTableEntries; ++i)
    stuck.get()[i].state.store(kStringWriting, std::memory_order_relaxed);
  CHECK(stuck.intern("name") == 0);
  CHECK(stuck.full.load() == 1);
  CHECK(spanring::intern(stuck.get(), "name", 4, nullptr) == 0);  // no counter: still 0
  CHECK(string_table_usage(stuck.get()).writing == kStringTableEntries - 1);
  CHECK(string_table_usage(stuck.get()).corrupt == 1);  // entry 0: nobody takes it
}

TEST_CASE("an entry left mid-write is probed past: the string goes to the next entry") {
  Table t;
  const std::string s = "node.step";
  const uint32_t home = string_hash(s.data(), static_cast<uint32_t>(s.size())) &
                        (kStringTableEntries - 1);
  REQUIRE(home != 0);
  t.get()[home].state.store(kStringWriting, std::memory_order_relaxed);  // a killed writer
  const uint16_t id = t.intern(s);
  REQUIRE(id != 0);
  CHECK(id != home);
  StringTableReader reader(t.get());
  CHECK(resolved(reader, id) == s);
  std::string_view out;
  std::string why;
  CHECK_FALSE(reader.resolve(home, out, why));
  CHECK(why.find("not ready") != std::string::npos);
  const StringTableUsage usage = string_table_usage(t.get());
  CHECK(usage.ready == 1);
  CHECK(usage.writing == 1);
  CHECK(usage.corrupt == 0);
}

TEST_CASE("every kind of corrupt entry or id fails to resolve with its reason, and a kept copy does not change") {
  Table t;
  StringTableReader reader(t.get());
  std::string_view out;
  std::string why;
  const std::string good = "good.name";
  const uint32_t good_hash = string_hash(good.data(), static_cast<uint32_t>(good.size()));
  struct Case {
    const char* what;
    uint32_t id;
    uint32_t state;
    std::string bytes;
    uint32_t hash;
    uint32_t len;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"id 0", 0, kStringReady, good, good_hash, 9, "outside the table"},
      {"empty entry", 10, kStringEmpty, good, good_hash, 9, "not ready"},
      {"left mid-write", 11, kStringWriting, good, good_hash, 9, "not ready"},
      {"unknown state", 12, 77, good, good_hash, 9, "not ready"},
      {"length 0", 13, kStringReady, good, string_hash("", 0), 0, "has length 0"},
      {"length past the entry", 14, kStringReady, good, good_hash, kStringMaxBytes + 1,
       "has length"},
      {"huge length", 15, kStringReady, good, good_hash, 0xffffffffu, "has length"},
      {"NUL byte", 16, kStringReady, std::string("go\0d", 4), string_hash("go\0d", 4), 4,
       "NUL byte"},
      {"hash mismatch", 17, kStringReady, good, good_hash ^ 1, 9, "does not match its hash"},
      {"bytes changed under the hash", 18, kStringReady, "gooD.name", good_hash, 9,
       "does not match its hash"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    put_entry(t.get()[c.id], c.state, c.bytes, c.hash, c.len);
    why.clear();
    CHECK_FALSE(reader.resolve(c.id, out, why));
    CHECK(why.find(c.reason) != std::string::npos);
  }
  for (const uint32_t id : {kStringTableEntries, kStringTableEntries + 1, 0xffffu, 0xffffffffu}) {
    CAPTURE(id);
    CHECK_FALSE(reader.resolve(id, out, why));
    CHECK(why.find("outside the table") != std::string::npos);
  }
  const StringTableUsage usage = string_table_usage(t.get());
  CHECK(usage.ready == 0);
  CHECK(usage.writing == 1);
  CHECK(usage.corrupt == 8);  // id 0, the unknown state and six ready entries that fail checks

  // A good entry, resolved once, keeps its bytes whatever is written over it later.
  put_entry(t.get()[20], kStringReady, good, good_hash, 9);
  CHECK(resolved(reader, 20) == good);
  put_entry(t.get()[20], kStringReady, "evil.name", good_hash, 9);
  CHECK(resolved(reader, 20) == good);
  t.get()[20].state.store(kStringEmpty);
  CHECK(resolved(reader, 20) == good);

  // No table: every id fails, none crashes.
  StringTableReader none;
  CHECK_FALSE(none.resolve(1, out, why));
  CHECK(why.find("no string table") != std::string::npos);
}

TEST_CASE("random bytes over the whole table: resolve and intern never crash, and what resolves checks out") {
  std::mt19937_64 rng(20240611);
  uint64_t resolved_total = 0;
  uint64_t failed_total = 0;
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    Table t;
    auto* raw = reinterpret_cast<unsigned char*>(t.get());
    const size_t bytes = sizeof(StringEntry) * kStringTableEntries;
    for (size_t i = 0; i < bytes; ++i) raw[i] = static_cast<unsigned char>(rng());
    // Random states rarely read as ready: make a share of the entries plausible, so that
    // the length, NUL and hash checks run on random content too, and some entries pass.
    for (uint32_t id = 0; id < kStringTableEntries; ++id) {
      StringEntry& e = t.get()[id];
      switch (rng() % 4) {
        case 0:
          e.state.store(kStringReady, std::memory_order_relaxed);
          e.len = static_cast<uint32_t>(rng() % (kStringMaxBytes + 3));
          break;
        case 1: {
          e.state.store(kStringReady, std::memory_order_relaxed);
          const uint32_t len = 1 + static_cast<uint32_t>(rng() % kStringMaxBytes);
          for (uint32_t i = 0; i < len; ++i) e.bytes[i] = static_cast<char>(1 + rng() % 255);
          e.len = len;
          e.hash = string_hash(e.bytes, len);  // a valid entry of random bytes
          break;
        }
        default:
          break;  // random state, length, hash and bytes
      }
    }
    StringTableReader reader(t.get());
    std::string_view out;
    std::string why;
    for (int k = 0; k < 6000; ++k) {
      const uint32_t id = k < 4096 ? static_cast<uint32_t>(k) : static_cast<uint32_t>(rng());
      if (reader.resolve(id, out, why)) {
        ++resolved_total;
        REQUIRE(id != 0);
        REQUIRE(id < kStringTableEntries);
        REQUIRE(!out.empty());
        REQUIRE(out.size() <= kStringMaxBytes);
        CHECK(out.find('\0') == std::string_view::npos);
        CHECK(string_hash(out.data(), static_cast<uint32_t>(out.size())) ==
              t.get()[id].hash);
      } else {
        ++failed_total;
        CHECK(!why.empty());
      }
    }
    const StringTableUsage usage = string_table_usage(t.get());
    CHECK(usage.ready + usage.writing + usage.corrupt <= kStringTableEntries);
    // intern into a hostile table: any id it gives names an entry holding exactly the string.
    for (uint32_t n = 0; n < 50; ++n) {
      const std::string s = string_for(n);
      const uint16_t id = t.intern(s);
      if (id == 0) continue;
      std::string_view got;
      REQUIRE_MESSAGE(reader.resolve(id, got, why), why);
      CHECK(got == s);
    }
  }
  CHECK(resolved_total > 0);  // the valid random entries resolved
  CHECK(failed_total > 0);
}
