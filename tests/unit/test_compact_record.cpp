// RingReader on compact records (kRecordCompact, segment_layout.h): CompactRecord slots written
// by hand into a ring laid out as a segment (its string table filled through intern()), read
// back next to the ordinary record of the same span. The copies, their [STRACE] lines and their
// binary events must be byte-identical; a bad sequence number or framing is ring corruption
// (kCorrupt), an id that does not resolve is one bad record (kBadString) and the ring reads on.
#include <doctest/doctest.h>

#include "format/binary_sink.h"
#include "format/text_sink.h"
#include "src/ring.h"
#include "src/string_table.h"

#include <spanring/packed_attrs.h>
#include <spanring/segment_layout.h>

#include <climits>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace spanring;

namespace {

// One ring of a heap buffer laid out as a one-ring segment: header, ring header, string table,
// slots.
struct OneRing {
  static constexpr uint32_t kCapacity = 16;  // slots: wraps often
  std::unique_ptr<std::byte[]> bytes{new std::byte[segment_bytes(1, kCapacity)]()};
  RingHeader& header() { return *reinterpret_cast<RingHeader*>(bytes.get() + rings_offset()); }
  std::byte* slots() { return bytes.get() + slots_offset(1); }
  StringEntry* strings() {
    return reinterpret_cast<StringEntry*>(bytes.get() + strings_offset(1));
  }
  std::atomic<uint64_t> full{0};
  uint16_t intern(const std::string& s) {
    const uint16_t id =
        spanring::intern(strings(), s.data(), static_cast<uint32_t>(s.size()), &full);
    REQUIRE(id != 0);
    return id;
  }
};

// A span as the producer sees it: name, up to 4 integer attributes (or one literal text).
struct Span {
  std::string name;
  std::vector<std::string> keys;
  std::vector<int64_t> values;  // each fits 32 bits: int32 when signed, uint32 otherwise
  std::vector<bool> is_signed;
  std::string text;             // kCompactAttrsText when non-empty (then no keys)
  uint64_t ts = 0, dur = 0, inv = 0, hid = 0;
  uint32_t depth = 0;
  bool tsc = false;
};

// The attribute text an ordinary record of `s` stands for (raw, cut at kAttrsRawMax).
std::string attr_text(const Span& s) {
  if (!s.text.empty()) return s.text;
  std::string t;
  for (size_t i = 0; i < s.keys.size(); ++i) {
    if (i != 0) t += ' ';
    t += s.keys[i] + "=" + std::to_string(s.values[i]);
  }
  return t.substr(0, kAttrsRawMax);
}

// The packed list of `s`'s integer attributes, when it fits (as a Span stores them).
bool packed(const Span& s, std::string& out) {
  char buf[4 * (2 + kStringMaxBytes + 8) + 8];
  uint32_t n = 0;
  for (size_t i = 0; i < s.keys.size(); ++i) {
    const bool neg = s.values[i] < 0;
    const uint64_t mag = neg ? 0 - static_cast<uint64_t>(s.values[i])
                             : static_cast<uint64_t>(s.values[i]);
    n += pack_token(buf + n, s.keys[i].data(), static_cast<uint32_t>(s.keys[i].size()),
                    neg ? kPackedNegative : kPackedUnsigned, mag);
  }
  out.assign(buf, n);
  return n >= 1 && n <= kAttrsPackedMax;
}

// The CompactRecord slot of `s` with sequence number `seq`.
CompactRecord compact_of(OneRing& ring, const Span& s, uint64_t seq) {
  CompactRecord c{};
  c.ts_ns = s.ts;
  c.inv = s.inv;
  c.hid = s.hid;
  c.dur_ns = static_cast<uint32_t>(s.dur);
  c.seq_lo = static_cast<uint32_t>(seq);
  c.slots = 1;
  c.flags = static_cast<uint16_t>(kRecordCompact | (s.tsc ? kRecordTsc : 0));
  c.name = ring.intern(s.name);
  c.depth = static_cast<uint8_t>(s.depth);
  if (!s.text.empty()) {
    c.keys[0] = ring.intern(s.text);
    c.attrs = kCompactAttrsText;
    return c;
  }
  c.attrs = static_cast<uint8_t>(s.keys.size());
  for (size_t i = 0; i < s.keys.size(); ++i) {
    c.keys[i] = ring.intern(s.keys[i]);
    c.values[i] = static_cast<uint32_t>(s.values[i]);
    if (s.is_signed[i]) c.attrs = static_cast<uint8_t>(c.attrs | 1u << (4 + i));
  }
  return c;
}

// Publishes one hand-written slot at the ring's head (as RingWriter::publish does).
void put_slot(OneRing& ring, const CompactRecord& c) {
  const uint64_t head = ring.header().head.load();
  std::memcpy(ring.slots() + (head % OneRing::kCapacity) * kSlotBytes, &c, sizeof c);
  ring.header().head.store(head + 1, std::memory_order_release);
}

// What the sinks write for `rec`.
std::string text_of(const RecordCopy& rec) {
  TextSink sink;
  std::vector<char> out(sink.max_event_bytes());
  return std::string(out.data(), sink.span(out.data(), SpanEvent::of(77, 78, rec)));
}
std::string binary_of(const RecordCopy& rec) {
  BinarySink sink(false);
  std::vector<char> out(sink.max_event_bytes());
  return std::string(out.data(), sink.span(out.data(), SpanEvent::of(77, 78, rec)));
}

void check_same(const RecordCopy& a, const RecordCopy& b) {
  CHECK(a.header.seq == b.header.seq);
  CHECK(a.header.ts_ns == b.header.ts_ns);
  CHECK(a.header.dur_ns == b.header.dur_ns);
  CHECK(a.header.inv == b.header.inv);
  CHECK(a.header.hid == b.header.hid);
  CHECK(a.header.depth == b.header.depth);
  CHECK(a.header.flags == b.header.flags);
  CHECK(a.header.slots == 1);
  REQUIRE(a.header.name_len == b.header.name_len);
  REQUIRE(a.header.attrs_len == b.header.attrs_len);
  CHECK(std::string(a.name(), a.header.name_len) == std::string(b.name(), b.header.name_len));
  CHECK(std::string(a.attrs(), a.header.attrs_len) ==
        std::string(b.attrs(), b.header.attrs_len));
  CHECK(text_of(a) == text_of(b));
  CHECK(binary_of(a) == binary_of(b));
}

std::string random_string(std::mt19937_64& rng, uint32_t max_len) {
  const uint32_t len = 1 + static_cast<uint32_t>(rng() % max_len);
  std::string s;
  // Printable ASCII and bytes that the encoder escapes (space, %, =, UTF-8 and invalid bytes),
  // never NUL.
  for (uint32_t i = 0; i < len; ++i) {
    const uint32_t k = static_cast<uint32_t>(rng() % 10);
    s += k < 7 ? static_cast<char>('a' + rng() % 26)
               : static_cast<char>(1 + rng() % 255);
  }
  return s;
}

// Names, keys and texts drawn from pools, so that the table (4095 entries) holds them all.
struct Pools {
  std::vector<std::string> names, short_keys, long_keys, texts;
  explicit Pools(std::mt19937_64& rng) {
    for (int i = 0; i < 400; ++i) names.push_back(random_string(rng, kStringMaxBytes));
    for (int i = 0; i < 200; ++i) short_keys.push_back(random_string(rng, 12));
    for (int i = 0; i < 100; ++i) {  // 40..64 bytes: four of them pass kAttrsRawMax
      std::string k = random_string(rng, 24);
      while (k.size() < 40u + static_cast<uint32_t>(i) % 25) k += 'k';
      long_keys.push_back(k);
    }
    for (int i = 0; i < 100; ++i) texts.push_back(random_string(rng, kStringMaxBytes));
  }
  static const std::string& pick(std::mt19937_64& rng, const std::vector<std::string>& v) {
    return v[rng() % v.size()];
  }
};

Span random_span(std::mt19937_64& rng, const Pools& pools) {
  Span s;
  s.name = Pools::pick(rng, pools.names);
  s.ts = rng() >> 1;
  s.dur = rng() % (uint64_t{1} << 32);
  s.inv = rng() % 3 == 0 ? 0 : rng();
  s.hid = rng() % 3 == 0 ? 0 : rng();
  s.depth = static_cast<uint32_t>(rng() % 256);
  s.tsc = rng() % 2 == 0;
  if (rng() % 8 == 0) {
    s.text = Pools::pick(rng, pools.texts);
    return s;
  }
  // One span in eight has four long keys (its text is cut at kAttrsRawMax); the others short
  // keys mostly (the packed list fits), a long one sometimes.
  const bool all_long = rng() % 8 == 0;
  const uint32_t count =
      all_long ? kCompactAttrs : static_cast<uint32_t>(rng() % (kCompactAttrs + 1));
  for (uint32_t i = 0; i < count; ++i) {
    s.keys.push_back(
        Pools::pick(rng, all_long || rng() % 4 == 0 ? pools.long_keys : pools.short_keys));
    const bool sig = rng() % 2 == 0;
    s.is_signed.push_back(sig);
    switch (rng() % 4) {
      case 0: s.values.push_back(sig ? INT32_MIN : int64_t{UINT32_MAX}); break;
      case 1: s.values.push_back(0); break;
      default:
        s.values.push_back(sig ? int64_t{static_cast<int32_t>(rng())}
                               : int64_t{static_cast<uint32_t>(rng())});
    }
  }
  return s;
}

}  // namespace

TEST_CASE("a compact record reads back byte-identical to the ordinary record of the same span") {
  // Two rings: the ordinary records (RingWriter: text, and packed when the attributes fit
  // packed, as a Span stores them) in one, the compact records (by hand) in the other.
  OneRing plain;
  RingWriter w{};
  w.attach(&plain.header(), plain.slots(), OneRing::kCapacity);
  RingReader plain_reader(&plain.header(), plain.slots(), OneRing::kCapacity, 0);
  OneRing ring;
  StringTableReader strings(ring.strings());
  RingReader reader(&ring.header(), ring.slots(), OneRing::kCapacity, 0, &strings);
  std::mt19937_64 rng(11);
  const Pools pools(rng);
  RecordCopy ordinary;
  RecordCopy compact;
  std::string why;
  uint64_t plain_seq = 0;
  uint64_t packed_compared = 0;
  uint64_t cut_compared = 0;
  auto read_plain = [&] {
    REQUIRE_MESSAGE(plain_reader.read(plain_reader.head(), plain_seq, ordinary, why) ==
                        ReadStatus::kRecord,
                    why);
    CHECK(ordinary.header.seq == plain_seq);
    ++plain_seq;
    plain.header().tail.store(plain_reader.position(), std::memory_order_release);
  };
  for (uint64_t seq = 0; seq < 3000; ++seq) {
    Span s = random_span(rng, pools);
    if (seq == 0) {  // the demo's shape: a literal name, four integers
      s = Span{"node.step", {"i", "n", "rank", "delta"}, {3, 1000, 0, -42},
               {false, false, false, true}, "", 123456789, 5000, 7, 9, 2, false};
    }
    CAPTURE(seq);
    put_slot(ring, compact_of(ring, s, seq));
    REQUIRE_MESSAGE(reader.read(reader.head(), seq, compact, why) == ReadStatus::kRecord, why);
    CHECK(compact.header.seq == seq);
    ring.header().tail.store(reader.position(), std::memory_order_release);

    const std::string text = attr_text(s);
    const uint16_t flags = s.tsc ? kRecordTsc : 0;
    // The ordinary record with text attributes (emit, or a Span whose list unpacked).
    REQUIRE(w.write(s.name.data(), static_cast<uint32_t>(s.name.size()), text.data(),
                    static_cast<uint32_t>(text.size()), s.ts, s.dur, s.inv, s.hid, s.depth,
                    flags));
    read_plain();
    ordinary.header.seq = seq;  // the rings' sequences differ; nothing else may
    check_same(compact, ordinary);
    if (text.size() == kAttrsRawMax) ++cut_compared;
    // The packed ordinary record, when the attributes fit packed (what a Span writes).
    std::string list;
    if (s.text.empty() && packed(s, list)) {
      REQUIRE(w.write(s.name.data(), static_cast<uint32_t>(s.name.size()), list.data(),
                      static_cast<uint32_t>(list.size()), s.ts, s.dur, s.inv, s.hid, s.depth,
                      static_cast<uint16_t>(flags | kRecordPackedAttrs)));
      read_plain();
      ordinary.header.seq = seq;
      check_same(compact, ordinary);
      ++packed_compared;
    }
  }
  CHECK(packed_compared > 500);
  CHECK(cut_compared > 10);  // long keys: the text was cut at kAttrsRawMax, alike
  CHECK(ring.full.load() == 0);
}

TEST_CASE("a compact record whose sequence low bits do not match, or whose framing is bad, is ring corruption") {
  OneRing ring;
  StringTableReader strings(ring.strings());
  const Span s{"node.step", {"i"}, {1}, {false}, "", 10, 20, 0, 0, 0, false};
  struct Case {
    const char* what;
    void (*spoil)(CompactRecord&);
    const char* reason;
  };
  const Case cases[] = {
      {"seq_lo off by one", [](CompactRecord& c) { c.seq_lo += 1; }, "sequence low bits"},
      {"seq_lo of another lap", [](CompactRecord& c) { c.seq_lo ^= 0x80000000u; },
       "sequence low bits"},
      {"two slots", [](CompactRecord& c) { c.slots = 2; }, "claims 2 slots"},
      {"zero slots", [](CompactRecord& c) { c.slots = 0; }, "claims 0 slots"},
      {"packed bit too", [](CompactRecord& c) { c.flags |= kRecordPackedAttrs; }, "bad flags"},
      {"a marker bit", [](CompactRecord& c) { c.flags |= kRecordInvalid; }, "bad flags"},
      {"an unknown bit", [](CompactRecord& c) { c.flags |= 1u << 9; }, "bad flags"},
      {"five attributes", [](CompactRecord& c) { c.attrs = 5; }, "bad flags"},
      {"text and a count", [](CompactRecord& c) { c.attrs = kCompactAttrsText | 1; },
       "bad flags"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.what);
    ring.header().head.store(0);
    RingReader reader(&ring.header(), ring.slots(), OneRing::kCapacity, 0, &strings);
    CompactRecord c = compact_of(ring, s, 5);
    k.spoil(c);
    put_slot(ring, c);
    RecordCopy rec;
    std::string why;
    CHECK(reader.read(reader.head(), 5, rec, why) == ReadStatus::kCorrupt);
    CHECK(why.find(k.reason) != std::string::npos);
    CHECK(reader.position() == 0);  // not consumed
  }
  // The good one reads; the expected sequence's low bits are what is checked, at any height.
  ring.header().head.store(0);
  RingReader reader(&ring.header(), ring.slots(), OneRing::kCapacity, 0, &strings);
  const uint64_t seq = (uint64_t{7} << 32) | 5;
  put_slot(ring, compact_of(ring, s, seq));
  RecordCopy rec;
  std::string why;
  REQUIRE_MESSAGE(reader.read(reader.head(), seq, rec, why) == ReadStatus::kRecord, why);
  CHECK(rec.header.seq == seq);
  CHECK(std::string(rec.attrs(), rec.header.attrs_len) == "i=1");
}

TEST_CASE("a compact record with an id that does not resolve is one bad record; the ring reads on") {
  OneRing ring;
  StringTableReader strings(ring.strings());
  const Span s{"node.step", {"i", "n"}, {1, 2}, {false, true}, "", 10, 20, 0, 0, 3, false};
  const uint16_t unready = 4000;
  ring.strings()[unready].state.store(kStringWriting);  // a writer killed mid-registration
  const uint16_t bad_hash = 4001;
  ring.strings()[bad_hash].len = 3;
  std::memcpy(ring.strings()[bad_hash].bytes, "abc", 3);
  ring.strings()[bad_hash].hash = 0;
  ring.strings()[bad_hash].state.store(kStringReady);
  struct Case {
    const char* what;
    void (*spoil)(CompactRecord&, uint16_t, uint16_t);
    const char* reason;
  };
  const Case cases[] = {
      {"name id 0", [](CompactRecord& c, uint16_t, uint16_t) { c.name = 0; }, "name: "},
      {"name id past the table",
       [](CompactRecord& c, uint16_t, uint16_t) { c.name = kStringTableEntries; },
       "outside the table"},
      {"name id of an entry left mid-write",
       [](CompactRecord& c, uint16_t u, uint16_t) { c.name = u; }, "not ready"},
      {"key id of a bad hash", [](CompactRecord& c, uint16_t, uint16_t b) { c.keys[1] = b; },
       "key 1: "},
      {"key id of an empty entry", [](CompactRecord& c, uint16_t, uint16_t) { c.keys[0] = 3999; },
       "key 0: "},
      {"attribute text id 0",
       [](CompactRecord& c, uint16_t, uint16_t) {
         c.attrs = kCompactAttrsText;
         c.keys[0] = 0;
       },
       "attribute text: "},
  };
  RingReader reader(&ring.header(), ring.slots(), OneRing::kCapacity, 0, &strings);
  uint64_t seq = 100;
  for (const Case& k : cases) {
    CAPTURE(k.what);
    CompactRecord c = compact_of(ring, s, seq);
    k.spoil(c, unready, bad_hash);
    put_slot(ring, c);
    put_slot(ring, compact_of(ring, s, seq + 1));  // a good record right after it
    RecordCopy rec;
    std::string why;
    const uint64_t before = reader.position();
    const uint64_t head = reader.head();
    CHECK(reader.read(head, seq, rec, why) == ReadStatus::kBadString);
    CHECK(why.find(k.reason) != std::string::npos);
    CHECK(why.find("seq " + std::to_string(seq)) != std::string::npos);
    CHECK(rec.header.seq == seq);
    CHECK(rec.header.depth == 3);
    CHECK(reader.position() == before + 1);  // consumed: one slot
    REQUIRE_MESSAGE(reader.read(head, seq + 1, rec, why) == ReadStatus::kRecord, why);
    CHECK(rec.header.seq == seq + 1);
    CHECK(std::string(rec.name(), rec.header.name_len) == "node.step");
    CHECK(std::string(rec.attrs(), rec.header.attrs_len) == "i=1 n=2");
    ring.header().tail.store(reader.position(), std::memory_order_release);
    seq += 2;
  }
  // Without a string table every compact record is a bad one (nothing to resolve against).
  RingReader bare(&ring.header(), ring.slots(), OneRing::kCapacity, reader.position());
  put_slot(ring, compact_of(ring, s, seq));
  RecordCopy rec;
  std::string why;
  CHECK(bare.read(bare.head(), seq, rec, why) == ReadStatus::kBadString);
  CHECK(why.find("no string table") != std::string::npos);
}

TEST_CASE("a compact record keeps kRecordTsc and its 32-bit fields at their extremes") {
  OneRing ring;
  StringTableReader strings(ring.strings());
  RingReader reader(&ring.header(), ring.slots(), OneRing::kCapacity, 0, &strings);
  Span s{"x", {"a", "b", "c", "d"}, {INT32_MIN, INT32_MAX, int64_t{UINT32_MAX}, -1},
         {true, true, false, true}, "", ~uint64_t{0}, UINT32_MAX, ~uint64_t{0}, ~uint64_t{0},
         255, true};
  put_slot(ring, compact_of(ring, s, 0));
  RecordCopy rec;
  std::string why;
  REQUIRE_MESSAGE(reader.read(reader.head(), 0, rec, why) == ReadStatus::kRecord, why);
  CHECK(rec.header.flags == kRecordTsc);
  CHECK(rec.header.ts_ns == ~uint64_t{0});
  CHECK(rec.header.dur_ns == UINT32_MAX);
  CHECK(rec.header.depth == 255);
  CHECK(std::string(rec.attrs(), rec.header.attrs_len) ==
        "a=-2147483648 b=2147483647 c=4294967295 d=-1");
}
