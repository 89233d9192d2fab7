// The producer's compact records, read straight from the ring slots and the string table (no
// drainer): which spans become one CompactRecord, what its fields hold, and when the producer
// falls back to an ordinary record. Compiled with -O2 (tests/meson.build): literal detection
// (span.h, "Literal strings") needs the optimizer; at -O0 every record is ordinary and this
// test says so and fails.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <spanring/packed_attrs.h>
#include <spanring/segment.h>
#include <spanring/simpler_host_span.h>
#include <spanring/span.h>

#include "producer_test_util.h"

#include <spanring/spanring.h>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace spanring;
using producer_test::Slot;
using producer_test::TestSegment;
using producer_test::unique_name;

namespace {

#ifndef __OPTIMIZE__
#error "test_compact_producer.cpp must be compiled with optimization (literal detection)"
#endif

// The name and the attribute text of an ordinary record.
std::string name_of(const Slot& s) { return s.payload.substr(0, s.header().name_len); }
std::string attrs_text(const Slot& s) {
  const RecordHeader h = s.header();
  const std::string raw = s.payload.substr(h.name_len, h.attrs_len);
  if ((h.flags & kRecordPackedAttrs) == 0) return raw;
  char text[kAttrsRawMax];
  const int32_t n = unpack_attrs(raw.data(), h.attrs_len, text, sizeof text);
  REQUIRE(n >= 0);
  return std::string(text, static_cast<size_t>(n));
}

}  // namespace

TEST_CASE("a span with a literal name and four literal-keyed 32-bit integers is one compact slot") {
  TestSegment t("span");
  const auto recs = t.records_of([] {
    Span outer{"compact.outer"};
    {
      Span s{"compact.span16.x"};
      s.attr("run_id", uint64_t{7})
          .attr("delta", int64_t{-5})
          .attr("worker_id", 0)
          .attr("dispatch_id", 4294967295u);
    }
  });
  REQUIRE(recs.size() == 2);
  for (const Slot& s : recs) {
    CHECK(s.slots() == 1);
    CHECK((s.flags() & kRecordCompact) != 0);
    CHECK((s.flags() & ~(kRecordCompact | kRecordTsc)) == 0);
  }
  const CompactRecord c = recs[0].compact();
  CHECK(t.string(c.name) == "compact.span16.x");
  CHECK(c.depth == 1);
  CHECK(c.seq_lo == 0);
  CHECK((c.attrs & 7) == 4);
  CHECK((c.attrs & kCompactAttrsText) == 0);
  CHECK(t.string(c.keys[0]) == "run_id");
  CHECK(t.string(c.keys[1]) == "delta");
  CHECK(t.string(c.keys[2]) == "worker_id");
  CHECK(t.string(c.keys[3]) == "dispatch_id");
  CHECK(c.values[0] == 7);
  CHECK(static_cast<int32_t>(c.values[1]) == -5);
  CHECK(c.values[2] == 0);
  CHECK(c.values[3] == 4294967295u);
  CHECK((c.attrs >> 4) == 0b0010);  // only value 1 is negative
  const CompactRecord o = recs[1].compact();
  CHECK(t.string(o.name) == "compact.outer");
  CHECK(o.depth == 0);
  CHECK(o.seq_lo == 1);
  CHECK(o.attrs == 0);
  CHECK(o.ts_ns <= c.ts_ns);
}

TEST_CASE("what does not fit a compact slot goes out as an ordinary record with the same text") {
  TestSegment t("ordinary");
  std::string runtime_name = "ordinary.runtime";
  std::string key = "k";
  const auto recs = t.records_of([&] {
    { Span s{"ordinary.five"};
      s.attr("a", 1).attr("b", 2).attr("c", 3).attr("d", 4).attr("e", 5); }
    { Span s{"ordinary.wide"}; s.attr("w", uint64_t{1} << 40); }
    { Span s{"ordinary.text"}; s.attr("a", 1).attr("t", "x"); }
    { Span s{"ordinary.dyn"}; s.attr("a", -1).attr(key, 2); }
    { Span s{runtime_name.c_str()}; s.attr("a", 1); }
  });
  REQUIRE(recs.size() == 5);
  for (const Slot& s : recs) CHECK((s.flags() & kRecordCompact) == 0);
  CHECK(name_of(recs[0]) == "ordinary.five");
  CHECK(attrs_text(recs[0]) == "a=1 b=2 c=3 d=4 e=5");
  CHECK(name_of(recs[1]) == "ordinary.wide");
  CHECK(attrs_text(recs[1]) == "w=1099511627776");
  CHECK(name_of(recs[2]) == "ordinary.text");
  CHECK(attrs_text(recs[2]) == "a=1 t=x");
  CHECK(name_of(recs[3]) == "ordinary.dyn");
  CHECK(attrs_text(recs[3]) == "a=-1 k=2");
  CHECK(name_of(recs[4]) == "ordinary.runtime");
  CHECK(attrs_text(recs[4]) == "a=1");
}

TEST_CASE("emit of a literal name and literal attributes is compact; a runtime text is not") {
  TestSegment t("emit");
  std::string attrs = "a=1 b=2";
  const auto recs = t.records_of([&] {
    CHECK(emit("emit.lit", 1000, 20, "run_id=7 task_slot=42"));
    CHECK(emit("emit.noattrs", 1000, 20));
    CHECK(emit("emit.lit", 1000, 20, attrs.c_str()));
    CHECK(emit("emit.longdur", 1000, int64_t{1} << 33, "x=1"));
  });
  REQUIRE(recs.size() == 4);
  const CompactRecord c = recs[0].compact();
  CHECK(c.flags == kRecordCompact);
  CHECK(t.string(c.name) == "emit.lit");
  CHECK(c.attrs == kCompactAttrsText);
  CHECK(t.string(c.keys[0]) == "run_id=7 task_slot=42");
  CHECK(c.ts_ns == 1000);
  CHECK(c.dur_ns == 20);
  const CompactRecord n = recs[1].compact();
  CHECK(n.flags == kRecordCompact);
  CHECK(t.string(n.name) == "emit.noattrs");
  CHECK(n.attrs == 0);
  CHECK(n.seq_lo == 1);
  CHECK((recs[2].flags() & kRecordCompact) == 0);
  CHECK(recs[2].header().seq == 2);
  CHECK(attrs_text(recs[2]) == "a=1 b=2");
  CHECK((recs[3].flags() & kRecordCompact) == 0);
  CHECK(recs[3].header().dur_ns == uint64_t{1} << 33);
}

TEST_CASE("the first record after a drop is ordinary, carrying its whole sequence number") {
  TestSegment t("drop", 16);  // kMinRingCapacity slots, never drained here
  const auto recs = t.records_of([] {
    for (int i = 0; i < 20; ++i) emit("drop.lit", 1000 + i, 1);  // 16 stored, 4 dropped
  });
  REQUIRE(recs.size() == 16);
  for (const Slot& s : recs) CHECK((s.flags() & kRecordCompact) != 0);
  // Make room (as the drainer would) and write again on a ring with a gap behind it.
  TestSegment u("gap", 16);
  uint32_t ring = ~0u;
  std::vector<Slot> after;
  std::thread([&] {
    for (int i = 0; i < 17; ++i) emit("drop.lit", 1000 + i, 1);  // the 17th is dropped
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t i = 0; i < u.seg.ring_count(); ++i)
      if (u.seg.ring(i).owner_tid == tid) ring = i;
    REQUIRE(ring != ~0u);
    RingHeader& r = u.seg.ring(ring);
    CHECK(r.drops.load(std::memory_order_acquire) == 1);
    r.tail.store(r.head.load(std::memory_order_acquire), std::memory_order_release);
    emit("drop.lit", 2000, 1);
    emit("drop.lit", 2001, 1);
  }).join();
  after = u.slots_of(ring);
  REQUIRE(after.size() == 2);
  CHECK((after[0].flags() & kRecordCompact) == 0);
  CHECK(after[0].header().seq == 17);
  CHECK((after[1].flags() & kRecordCompact) != 0);
  CHECK(after[1].compact().seq_lo == 18);
}

TEST_CASE("an open span's note names an interned span by its string id") {
  TestSegment t("open");
  uint32_t ring = ~0u;
  uint16_t id = 0;
  std::thread([&] {
    Span s{"open.literal"};
    const std::string runtime_name("open.runtime");  // a runtime name: must outlive the Span
    Span inner{runtime_name.c_str()};
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
      if (t.seg.ring(i).owner_tid == tid) ring = i;
    REQUIRE(ring != ~0u);
    const RingHeader& r = t.seg.ring(ring);
    CHECK(r.open_depth.load(std::memory_order_relaxed) == 2);
    id = r.open[0].name_id;
    CHECK(r.open[0].name_len == 0);
    CHECK((r.open[0].flags & ~kOpenTsc) == 0);
    CHECK(r.open[1].name_id == 0);
    CHECK(std::string(r.open[1].name, r.open[1].name_len) == "open.runtime");
  }).join();
  CHECK(t.string(id) == "open.literal");
}

namespace {
constexpr char kFullName[] = "full.name";
// One Span call, run twice by the test below: a call caches its literal's failure (in the
// module's table, or in the call's own descriptor on x86-64), so it is counted once.
__attribute__((noinline)) void full_span(int value) {
  Span s{kFullName};
  s.attr("a", value);
}
// One Span call, run by a parent and by its forked child below: the child uses what the call
// cached in the parent (the module's table, or the call's own descriptor on x86-64).
__attribute__((noinline)) void fork_span(int value) {
  Span s{"fork.span"};
  s.attr("fork_key", value);
}
}  // namespace

TEST_CASE("a string table without room makes ordinary records and counts it, losing nothing") {
  TestSegment t("full");
  // Take every entry a lookup of "full.name" may probe, with other strings.
  static constexpr const char* kName = kFullName;
  t.fill_probes(kName);
  const auto recs = t.records_of([] {
    full_span(1);
    full_span(2);
  });
  REQUIRE(recs.size() == 2);
  for (const Slot& s : recs) {
    CHECK((s.flags() & kRecordCompact) == 0);
  }
  CHECK(name_of(recs[0]) == kName);
  CHECK(attrs_text(recs[0]) == "a=1");
  CHECK(attrs_text(recs[1]) == "a=2");
  // Counted once: the call cached its literal's failure.
  CHECK(t.seg.view().header().strings_full.load(std::memory_order_relaxed) == 1);
}

TEST_CASE("a forked child keeps the literal ids: its compact records name the parent's entries") {
  TestSegment t("fork");
  uint16_t parent_name = 0;
  std::thread([&] {
    fork_span(1);
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
      if (t.seg.ring(i).owner_tid == tid) parent_name = t.slots_of(i).at(0).compact().name;
  }).join();
  REQUIRE(parent_name != 0);
  // Hide the name's entry from lookups in the table (its hash no longer matches): a child that
  // interned the name again would get a new entry and another id; one that uses the cache it
  // inherited names the parent's entry.
  StringEntry& entry = t.seg.view().strings()[parent_name];
  entry.hash ^= 1;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child: one span on its own ring (claimed under the child's pid), then exit.
    fork_span(2);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  bool found = false;
  for (uint32_t i = 0; i < t.seg.ring_count(); ++i) {
    if (t.seg.ring(i).owner_pid != static_cast<uint32_t>(child)) continue;
    const auto recs = t.slots_of(i);
    REQUIRE(recs.size() == 1);
    REQUIRE((recs[0].flags() & kRecordCompact) != 0);
    const CompactRecord c = recs[0].compact();
    CHECK(c.name == parent_name);
    CHECK(t.string(c.keys[0]) == "fork_key");
    CHECK(c.values[0] == 2);
    found = true;
  }
  CHECK(found);
  entry.hash ^= 1;
  CHECK(t.string(parent_name) == "fork.span");
}

// ---- the C ABI's text records: strings measured while they are copied into the ring

namespace {

// `len` bytes of a name or attribute text whose bytes tell their position.
std::string text_of(size_t len, char first) {
  std::string s;
  for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>(first + i % 23));
  return s;
}

void c_emit(const char* name, const char* attrs) {
  spanring_span s{};
  s.invocation_id = 3;
  s.callable_hash = 4;
  s.depth = 1;
  s.timestamp_ns = 2'000'000'000;
  s.duration_ns = 5;
  s.name = name;
  s.attributes = attrs;
  spanring_emit(&s);
}

// The same span through the host-span adapter (adapter/simpler_host_span.cpp, compiled into
// this test), whose common case writes the text record itself rather than calling spanring_emit.
void simpler_emit(const char* name, const char* attrs) {
  SimplerHostSpan s{};
  s.abi_version = SIMPLER_HOST_SPAN_ABI_VERSION;
  s.struct_size = sizeof s;
  s.invocation_id = 3;
  s.callable_hash = 4;
  s.depth = 1;
  s.timestamp_ns = 2'000'000'000;
  s.duration_ns = 5;
  s.name = name;
  s.attributes = attrs;
  unified_log_host_span(&s);
}

// The two writers of text records: each test below runs with both.
struct TextEmitter {
  const char* what;
  void (*emit)(const char* name, const char* attrs);
};
constexpr TextEmitter kTextEmitters[] = {{"C ABI", c_emit}, {"adapter", simpler_emit}};

}  // namespace

TEST_CASE("text records (C ABI, adapter) hold the name and attributes cut at their limits") {
  for (const TextEmitter& e : kTextEmitters) {
    CAPTURE(e.what);
    const auto c_emit = e.emit;
    TestSegment t("ctext", 4096);
    const size_t name_lens[] = {1, 11, 12, 15, 16, 17, 31, 32, 33, 64, 65, 66, 80, 200};
    const size_t attrs_lens[] = {0, 1, 15, 16, 17, 60, 176, 192, 193, 194, 208, 209, 400};
    std::vector<std::pair<std::string, std::string>> sent;
    const auto recs = t.records_of([&] {
      for (size_t nl : name_lens)
        for (size_t al : attrs_lens) {
          sent.emplace_back(text_of(nl, 'A'), text_of(al, 'a'));
          c_emit(sent.back().first.c_str(),
                 al == 0 && nl % 2 ? nullptr : sent.back().second.c_str());
        }
    });
    REQUIRE(recs.size() == sent.size());
    for (size_t i = 0; i < recs.size(); ++i) {
      CAPTURE(i);
      const RecordHeader h = recs[i].header();
      CHECK(h.flags == 0);
      CHECK(h.inv == 3);
      CHECK(h.hid == 4);
      CHECK(h.depth == 1);
      CHECK(h.ts_ns == 2'000'000'000u);
      CHECK(h.dur_ns == 5);
      CHECK(h.slots == record_slots(h.name_len + h.attrs_len));
      CHECK(name_of(recs[i]) == sent[i].first.substr(0, kNameRawMax));
      CHECK(attrs_text(recs[i]) == sent[i].second.substr(0, kAttrsRawMax));
    }
  }
}

TEST_CASE("text records (C ABI, adapter) read a string ending before an unmapped page only") {
  for (const TextEmitter& e : kTextEmitters) {
    CAPTURE(e.what);
    const auto c_emit = e.emit;
    TestSegment t("cpage", 4096);
    const long page = ::sysconf(_SC_PAGESIZE);
    REQUIRE(page >= 4096);
    // Two readable pages, then one that faults: strings end at the second page's last byte, and
    // others run across the first page's end.
    auto* map = static_cast<char*>(::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(map != MAP_FAILED);
    REQUIRE(::mprotect(map + 2 * page, page, PROT_NONE) == 0);
    std::vector<std::pair<std::string, std::string>> sent;
    const auto recs = t.records_of([&] {
      for (size_t len = 1; len <= 70; ++len) {
        // The name ends at the last readable byte; the attributes start 3 bytes before the first
        // page's end and run 60 bytes into the next.
        char* const name = map + 3 * page - page - static_cast<long>(len) - 1;
        const std::string n = text_of(len, 'A');
        std::memcpy(name, n.c_str(), len + 1);
        char* const attrs = map + page - 3;
        const std::string a = text_of(60 + len, 'a');
        std::memcpy(attrs, a.c_str(), a.size() + 1);
        sent.emplace_back(n, a);
        c_emit(name, attrs);
        // And the attributes ending at the last readable byte, the name across the page boundary.
        char* const attrs2 = map + 2 * page - static_cast<long>(len) - 1;
        std::memcpy(attrs2, n.c_str(), len + 1);
        char* const name2 = map + page - static_cast<long>(len % 16) - 1;
        const std::string n2 = text_of(len % 16 + 20, 'K');
        std::memcpy(name2, n2.c_str(), n2.size() + 1);
        sent.emplace_back(n2, n);
        c_emit(name2, attrs2);
      }
    });
    REQUIRE(recs.size() == sent.size());
    for (size_t i = 0; i < recs.size(); ++i) {
      CAPTURE(i);
      CHECK(name_of(recs[i]) == sent[i].first.substr(0, kNameRawMax));
      CHECK(attrs_text(recs[i]) == sent[i].second.substr(0, kAttrsRawMax));
    }
    ::munmap(map, 3 * page);
  }
}

TEST_CASE("C ABI and adapter text records across the ring's end and in a nearly full ring") {
  for (const TextEmitter& e : kTextEmitters) {
    CAPTURE(e.what);
    const auto c_emit = e.emit;
    // 16 slots: a record of 2 or 3 slots wraps around the end or finds fewer than 6 free slots
    // every few records, and takes the measured path; the bytes are the same either way.
    TestSegment t("cwrap", kMinRingCapacity);
    uint64_t checked = 0;
    std::thread([&] {
      const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
      uint32_t ring = ~0u;
      for (uint32_t round = 0; round < 40; ++round) {
        const std::string n = text_of(1 + round * 7 % 60, 'A');
        const std::string a = text_of(round * 13 % 150, 'a');
        c_emit(n.c_str(), a.c_str());
        if (ring == ~0u)
          for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
            if (t.seg.ring(i).owner_tid == tid &&
                t.seg.ring(i).state.load(std::memory_order_acquire) == kRingActive)
              ring = i;
        REQUIRE(ring != ~0u);
        // Records 4k+1 and 4k+2 stay unconsumed: the next ones find fewer free slots.
        const auto recs = t.slots_of(ring);
        REQUIRE(recs.size() == 1 + (round % 4 == 2 ? 1u : 0u) + (round % 4 == 3 ? 2u : 0u));
        CHECK(recs.back().header().seq == round);
        CHECK(name_of(recs.back()) == n);
        CHECK(attrs_text(recs.back()) == a);
        ++checked;
        // Consumed, as the drainer would: the next record may start anywhere in the ring.
        if (round % 4 == 0 || round % 4 == 3)
          t.seg.ring(ring).tail.store(t.seg.ring(ring).head.load(std::memory_order_acquire),
                                      std::memory_order_release);
      }
      CHECK(t.seg.ring(ring).drops.load(std::memory_order_acquire) == 0);
    }).join();
    CHECK(checked == 40);
  }
}

TEST_CASE("spans of one name with other key sets each carry their own keys") {
  TestSegment t("memo");
  // One name, so one slot of the thread's key memo: every span below either matches the keys
  // the memo holds or refills it; a wrong match would name another span's keys.
  const auto recs = t.records_of([] {
    for (int round = 0; round < 2; ++round) {
      { Span s{"memo.same"}; s.attr("a", 1); }
      { Span s{"memo.same"}; s.attr("a", 1).attr("b", 2); }
      { Span s{"memo.same"}; s.attr("a", 1).attr("b", 2).attr("c", 3).attr("d", 4); }
      { Span s{"memo.same"}; s.attr("a", 1).attr("b", 2).attr("c", 3).attr("e", 5); }
      { Span s{"memo.same"}; s.attr("a", 1).attr("b", 2).attr("c", 3).attr("e", 5); }
      { Span s{"memo.same"}; s.attr("x", 1).attr("b", 2).attr("c", 3).attr("e", 5); }
      { Span s{"memo.same"}; s.attr("a", 1).attr("x", 2); }
      { Span s{"memo.same"}; }
      { Span s{"memo.same"}; s.attr("b", 1).attr("a", 2); }
      { Span s{"memo.same"}; s.attr("a", 1).attr("b", 2).attr("c", 3); }
    }
  });
  const std::vector<std::vector<std::string>> want = {
      {"a"}, {"a", "b"}, {"a", "b", "c", "d"}, {"a", "b", "c", "e"}, {"a", "b", "c", "e"},
      {"x", "b", "c", "e"}, {"a", "x"}, {}, {"b", "a"}, {"a", "b", "c"}};
  REQUIRE(recs.size() == 2 * want.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    CAPTURE(i);
    REQUIRE((recs[i].flags() & kRecordCompact) != 0);
    const CompactRecord c = recs[i].compact();
    const auto& keys = want[i % want.size()];
    REQUIRE((c.attrs & 7u) == keys.size());
    for (size_t k = 0; k < keys.size(); ++k) CHECK(t.string(c.keys[k]) == keys[k]);
  }
}

TEST_CASE("spans that find the ring full are dropped and counted, one by one") {
  TestSegment t("spandrop", 16);  // kMinRingCapacity slots, never drained here
  uint32_t ring = ~0u;
  std::thread([&] {
    for (int i = 0; i < 20; ++i) {  // 16 stored, 4 dropped
      Span s{"spandrop.lit"};
      s.attr("i", i);
    }
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
      if (t.seg.ring(i).owner_tid == tid) ring = i;
    REQUIRE(ring != ~0u);
    CHECK(t.seg.ring(ring).drops.load(std::memory_order_acquire) == 4);
    CHECK(t.seg.ring(ring).open_depth.load(std::memory_order_relaxed) == 0);
  }).join();
  const auto recs = t.slots_of(ring);
  REQUIRE(recs.size() == 16);
  for (size_t i = 0; i < recs.size(); ++i) {
    REQUIRE((recs[i].flags() & kRecordCompact) != 0);
    CHECK(recs[i].compact().values[0] == i);
    CHECK(recs[i].compact().seq_lo == i);
  }
}
