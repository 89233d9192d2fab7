// SPANRING_SPAN, the call-site form (span.h, detail::SpanSite), read straight from the ring slots
// and the string table (no drainer): the same record bytes as Span, a site's ids kept for the
// current attach and resolved again after another attach (in process and in a forked child),
// several key sets at one site, threads sharing a site. Its own executable: every case attaches
// to a segment of its own, and a process keeps at most 16 attached regions off the heap
// (Segment::leak), which test_compact_producer's cases already use most of. Compiled with -O2
// (tests/meson.build): literal detection needs the optimizer.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <spanring/packed_attrs.h>
#include <spanring/segment.h>
#include <spanring/span.h>

#include "producer_test_util.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace spanring;
using producer_test::Slot;
using producer_test::TestSegment;
using producer_test::unique_name;

namespace {

#ifndef __OPTIMIZE__
#error "test_site_producer.cpp must be compiled with optimization (literal detection)"
#endif

}  // namespace

// ---- SPANRING_SPAN: the call-site form (span.h, detail::SpanSite)

namespace {

// A record's bytes as the drainer uses them: without the times and the sequence number, which
// differ between two spans, and without a compact record's value and key slots past its count
// (never read: the Span leaves those values unset).
std::string record_bytes(const Slot& s) {
  Slot c = s;
  if ((c.flags() & kRecordCompact) != 0) {
    CompactRecord r = c.compact();
    r.ts_ns = 0;
    r.dur_ns = 0;
    r.seq_lo = 0;
    const uint32_t count = (r.attrs & kCompactAttrsText) != 0 ? 0 : r.attrs & 7u;
    for (uint32_t i = count; i < kCompactAttrs; ++i) r.values[i] = 0;
    for (uint32_t i = (r.attrs & kCompactAttrsText) != 0 ? 1 : count; i < kCompactAttrs; ++i)
      r.keys[i] = 0;
    return std::string(reinterpret_cast<const char*>(&r), sizeof r);
  }
  RecordHeader h = c.header();
  h.seq = h.ts_ns = h.dur_ns = 0;
  return std::string(reinterpret_cast<const char*>(&h), offsetof(RecordHeader, payload)) +
         c.payload.substr(0, size_t{h.name_len} + h.attrs_len);
}

// Writes a string entry with `text` at id `id` of `seg`'s table, as a producer would: a later
// intern of another string that probes there goes past it.
void occupy(Segment& seg, uint16_t id, const std::string& text) {
  StringEntry& e = seg.view().strings()[id];
  REQUIRE(e.state.load(std::memory_order_acquire) == kStringEmpty);
  e.len = static_cast<uint32_t>(text.size());
  std::memcpy(e.bytes, text.data(), text.size());
  e.hash = string_hash(e.bytes, e.len);
  e.state.store(kStringReady, std::memory_order_release);
}

// One span of every shape, through Span (site == false) or SPANRING_SPAN: the same spans in
// the same order, so their records must be the same bytes.
void shapes(bool site, const std::string& runtime_key) {
  if (site) {
    SPANRING_SPAN(s, "same.noattr");
  } else {
    Span s{"same.noattr"};
  }
  for (int round = 0; round < 3; ++round) {
    if (site) {
      SPANRING_SPAN(outer, "same.outer");
      outer.attr("round", round);
      {
        SPANRING_SPAN(s, "same.four.attrs");
        s.attr("run_id", uint64_t{7}).attr("delta", int64_t{-5}).attr("w", 0).attr("d", 4294967295u);
      }
      { SPANRING_SPAN(s, "same.five"); s.attr("a", 1).attr("b", 2).attr("c", 3).attr("d", 4).attr("e", 5); }
      { SPANRING_SPAN(s, "same.wide"); s.attr("a", 1).attr("big", uint64_t{1} << 40); }
      { SPANRING_SPAN(s, "same.text"); s.attr("a", 1).attr("role", "sched"); }
      { SPANRING_SPAN(s, "same.runtime.key"); s.attr(runtime_key.c_str(), 3); }
      { SPANRING_SPAN(s, "same.name.of.more.than.sixty.four.bytes.is.never.interned.in.the.table.x"); s.attr("a", 1); }
    } else {
      Span outer{"same.outer"};
      outer.attr("round", round);
      {
        Span s{"same.four.attrs"};
        s.attr("run_id", uint64_t{7}).attr("delta", int64_t{-5}).attr("w", 0).attr("d", 4294967295u);
      }
      { Span s{"same.five"}; s.attr("a", 1).attr("b", 2).attr("c", 3).attr("d", 4).attr("e", 5); }
      { Span s{"same.wide"}; s.attr("a", 1).attr("big", uint64_t{1} << 40); }
      { Span s{"same.text"}; s.attr("a", 1).attr("role", "sched"); }
      { Span s{"same.runtime.key"}; s.attr(runtime_key.c_str(), 3); }
      { Span s{"same.name.of.more.than.sixty.four.bytes.is.never.interned.in.the.table.x"}; s.attr("a", 1); }
    }
  }
}

}  // namespace

TEST_CASE("SPANRING_SPAN records the same bytes as Span for the same spans") {
  TestSegment t("site_same");
  const std::string key = "runtime_key";
  const auto plain = t.records_of([&] { shapes(false, key); });
  const auto site = t.records_of([&] { shapes(true, key); });
  REQUIRE(plain.size() == 1 + 3 * 7);
  REQUIRE(site.size() == plain.size());
  size_t compact = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    CHECK(plain[i].flags() == site[i].flags());
    CHECK(record_bytes(plain[i]) == record_bytes(site[i]));
    compact += (site[i].flags() & kRecordCompact) != 0;
  }
  // The no-attribute span, and per round the outer span and the four-attribute one.
  CHECK(compact == 1 + 3 * 2);
}

TEST_CASE("a SPANRING_SPAN site keeps its name's and keys' ids for the current attach") {
  TestSegment t("site_kept");
  const uint32_t generation = detail::g_attach_generation.load(std::memory_order_relaxed);
  detail::SpanSite* seen = nullptr;
  const auto recs = t.records_of([&] {
    for (int i = 0; i < 3; ++i) {
      SPANRING_SPAN(s, "site.kept");
      s.attr("k1", i).attr("k2", -i);
      seen = &spanring_site_s;
    }
  });
  REQUIRE(seen != nullptr);
  REQUIRE(recs.size() == 3);
  const uint64_t name = seen->name.load(std::memory_order_relaxed);
  CHECK((name >> 32) == generation);
  CHECK(t.string(static_cast<uint16_t>(name)) == "site.kept");
  // Filled: tagged with the gate word of a thread of this generation inside a record write.
  CHECK(seen->keys_tag.load(std::memory_order_relaxed) ==
        (uint64_t{generation} << 32 | kGateOpen | kGateBusy));
  // The record's word 6 (one slot, compact and timed by the counter, the name, key 0) and word
  // 7 (keys 1..3, the count) as the span writes them.
  const uint64_t head = seen->keys_head;
  const uint64_t tail = seen->keys_tail;
  CHECK((head & 0xffffffff) == (1u | uint32_t{kRecordCompact | kRecordTsc} << 16));
  CHECK((head >> 32 & 0xffff) == static_cast<uint16_t>(name));
  const uint64_t ids = head >> 48 | tail << 16;
  CHECK(t.string(ids & 0xffff) == "k1");
  CHECK(t.string(ids >> 16 & 0xffff) == "k2");
  CHECK((ids >> 32 & 0xffffffffffff) == 0);
  CHECK((tail >> 56) == 2);
  // Word 6 of the site's spans without attributes: the name alone.
  CHECK(seen->name_head.load(std::memory_order_relaxed) ==
        RingWriter::compact_word6(kRecordCompact | kRecordTsc, static_cast<uint16_t>(name), 0));
  for (size_t i = 0; i < recs.size(); ++i) {
    REQUIRE((recs[i].flags() & kRecordCompact) != 0);
    const CompactRecord c = recs[i].compact();
    CHECK(c.name == static_cast<uint16_t>(name));
    CHECK(c.keys[0] == (ids & 0xffff));
    CHECK(c.keys[1] == (ids >> 16 & 0xffff));
    CHECK(c.values[0] == i);
    CHECK(static_cast<int32_t>(c.values[1]) == -static_cast<int32_t>(i));
  }
}

namespace {
// One site, used by the re-attach tests below (a static of this function: the same site in
// every call, also in a forked child).
// A span of one site, with the attribute reattach_key=value unless value is negative.
void site_span(int value) {
  SPANRING_SPAN(s, "reattach.site");
  if (value >= 0) s.attr("reattach_key", value);
}
}  // namespace

TEST_CASE("attaching again makes a SPANRING_SPAN site resolve its ids in the new segment") {
  uint16_t first_name = 0, first_key = 0;
  {
    TestSegment t1("site_reattach1");
    const auto recs = t1.records_of([] { site_span(1); site_span(2); });
    REQUIRE(recs.size() == 2);
    REQUIRE((recs[1].flags() & kRecordCompact) != 0);
    first_name = recs[1].compact().name;
    first_key = recs[1].compact().keys[0];
  }
  // The second segment has other strings at the first one's ids: a site that kept the first
  // attach's ids would name them.
  const std::string name2 = unique_name("site_reattach2");
  Segment seg2 = Segment::create(name2, SegmentOptions{4, 256});
  occupy(seg2, first_name, "decoy.name");
  occupy(seg2, first_key, "decoy_key");
  REQUIRE(attach(name2.c_str()));
  uint32_t ring = ~0u;
  std::thread([&] {
    // The thread's first span takes the library's path (it claims the ring) and renews the
    // site's name word; without an attribute it leaves the key set of the first attach in the
    // site. So the next span begins and ends inline with the old set there: its end must see
    // that set's tag (the first attach's gate word) unlike its own gate word and resolve the
    // key again, not write the first attach's ids.
    site_span(-1);
    site_span(3);
    site_span(4);
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t i = 0; i < seg2.ring_count(); ++i)
      if (seg2.ring(i).owner_tid == tid) ring = i;
  }).join();
  REQUIRE(ring != ~0u);
  const uint64_t head = seg2.ring(ring).head.load(std::memory_order_acquire);
  REQUIRE(head == 3);
  for (uint64_t pos = 0; pos < head; ++pos) {
    CompactRecord c;
    std::memcpy(&c, seg2.ring_slots(ring) + pos * kSlotBytes, sizeof c);
    REQUIRE((c.flags & kRecordCompact) != 0);
    const StringEntry* strings = seg2.view().strings();
    CHECK(c.name != first_name);
    CHECK(std::string(strings[c.name].bytes, strings[c.name].len) == "reattach.site");
    if (pos == 0) continue;  // the span without an attribute
    CHECK(c.keys[0] != first_key);
    CHECK(std::string(strings[c.keys[0]].bytes, strings[c.keys[0]].len) == "reattach_key");
    CHECK(c.values[0] == 2 + pos);
  }
  Segment::remove(name2);
}

TEST_CASE("a forked child that attaches to another segment resolves a site's ids there") {
  TestSegment t("site_fork_parent");
  uint16_t parent_name = 0, parent_key = 0;
  {
    const auto recs = t.records_of([] { site_span(1); site_span(2); });
    REQUIRE(recs.size() == 2);
    REQUIRE((recs[1].flags() & kRecordCompact) != 0);
    parent_name = recs[1].compact().name;
    parent_key = recs[1].compact().keys[0];
  }
  const std::string name2 = unique_name("site_fork_child");
  Segment seg2 = Segment::create(name2, SegmentOptions{4, 256});
  occupy(seg2, parent_name, "decoy.name");
  occupy(seg2, parent_key, "decoy_key");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child: a site the parent filled, used after the child attached to another segment
    // (attach() comes before the thread records: a ring it held would stay the old segment's).
    if (!attach(name2.c_str())) ::_exit(3);
    site_span(11);
    site_span(12);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  // Nothing of the child's in the parent's segment; in the second one its two spans, with that
  // segment's ids.
  for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
    CHECK(t.seg.ring(i).owner_pid != static_cast<uint32_t>(child));
  bool found = false;
  const StringEntry* strings = seg2.view().strings();
  for (uint32_t i = 0; i < seg2.ring_count(); ++i) {
    if (seg2.ring(i).owner_pid != static_cast<uint32_t>(child)) continue;
    const uint64_t head = seg2.ring(i).head.load(std::memory_order_acquire);
    REQUIRE(head == 2);
    for (uint64_t pos = 0; pos < head; ++pos) {
      CompactRecord c;
      std::memcpy(&c, seg2.ring_slots(i) + pos * kSlotBytes, sizeof c);
      REQUIRE((c.flags & kRecordCompact) != 0);
      CHECK(std::string(strings[c.name].bytes, strings[c.name].len) == "reattach.site");
      CHECK(std::string(strings[c.keys[0]].bytes, strings[c.keys[0]].len) == "reattach_key");
      CHECK(c.values[0] == 11 + pos);
    }
    found = true;
  }
  CHECK(found);
  Segment::remove(name2);
}

TEST_CASE("attach() to another segment is refused while a thread holds a ring") {
  TestSegment t1("held_ring1");
  const std::string name2 = unique_name("held_ring2");
  Segment seg2 = Segment::create(name2, SegmentOptions{4, 256});
  // A thread records, then waits (holding its ring) while the test attaches.
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  uint32_t tid = 0;
  std::thread holder([&] {
    site_span(1);
    std::unique_lock<std::mutex> lock(m);
    tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    step = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return step == 2; });
    lock.unlock();
    site_span(2);  // after the refused attach: still the first segment, with its ids
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return step == 1; });
  }
  CHECK_FALSE(attach(name2.c_str()));
  CHECK(attach(t1.name.c_str()));  // the same segment: a no-op
  // A name that cannot be opened: false, and the attached segment stays (not disabled).
  CHECK_FALSE(attach(unique_name("held_ring_missing").c_str()));
  CHECK(enabled());
  {
    std::lock_guard<std::mutex> lock(m);
    step = 2;
  }
  cv.notify_all();
  holder.join();
  uint32_t ring = ~0u;
  for (uint32_t i = 0; i < t1.seg.ring_count(); ++i)
    if (t1.seg.ring(i).owner_tid == tid) ring = i;
  REQUIRE(ring != ~0u);
  const auto recs = t1.slots_of(ring);
  REQUIRE(recs.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    REQUIRE((recs[k].flags() & kRecordCompact) != 0);
    CHECK(t1.string(recs[k].compact().name) == "reattach.site");
    CHECK(t1.string(recs[k].compact().keys[0]) == "reattach_key");
    CHECK(recs[k].compact().values[0] == k + 1);
  }
  for (uint32_t i = 0; i < seg2.ring_count(); ++i)
    CHECK(seg2.ring(i).head.load(std::memory_order_acquire) == 0);
  // The thread has exited and released its ring: now the other segment is taken.
  CHECK(attach(name2.c_str()));
  Segment::remove(name2);
}

TEST_CASE("a child forked inside a Span cannot attach elsewhere: the span's name is the parent's") {
  TestSegment t("open_fork_parent");
  const std::string name2 = unique_name("open_fork_child");
  Segment seg2 = Segment::create(name2, SegmentOptions{4, 256});
  // A child process opens the Span and forks inside it, so the test process holds no ring
  // afterwards; both forks are from a process with one thread (qemu-user aborts the child of a
  // multi-threaded fork, and the aarch64 step runs this test under it).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 4;
    {
      Span outer("open.fork.outer");
      const pid_t grandchild = ::fork();
      if (grandchild < 0) ::_exit(5);
      if (grandchild == 0) {
        // `outer` is open here with its name's id from the first segment: the grandchild must
        // stay there. Exit 0: attach refused, as it must be.
        ::_exit(attach(name2.c_str()) ? 3 : 0);
      }
      int st = 0;
      if (::waitpid(grandchild, &st, 0) == grandchild && WIFEXITED(st)) code = WEXITSTATUS(st);
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  uint64_t in_second = 0;
  for (uint32_t i = 0; i < seg2.ring_count(); ++i)
    in_second += seg2.ring(i).head.load(std::memory_order_acquire);
  CHECK(in_second == 0);
  // The child's span went to the first segment, under the child's pid.
  bool found = false;
  for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
    if (t.seg.ring(i).owner_pid == static_cast<uint32_t>(child) &&
        t.seg.ring(i).head.load(std::memory_order_acquire) >= 1)
      found = true;
  CHECK(found);
  Segment::remove(name2);
}

namespace {
// The attributes of key set `shape` of the SPANRING_SPAN key-set test (a function of its own,
// not inlined: one site, nine key sets).
__attribute__((noinline)) void add_key_set(Span& s, int shape) {
  switch (shape) {
    case 0: s.attr("a", 1).attr("b", 2); break;
    case 1: s.attr("a", 1); break;
    case 2: s.attr("a", 1).attr("b", 2).attr("c", 3).attr("d", 4); break;
    case 3: s.attr("a", 1).attr("b", 2); break;
    case 4: break;
    case 5: s.attr("b", 1).attr("a", 2); break;
    case 6: s.attr("a", 1).attr("b", 2).attr("c", 3).attr("e", 5); break;
    case 7: s.attr("x", 1).attr("b", 2); break;
    default: s.attr("a", 1).attr("b", 2); break;
  }
}
}  // namespace

TEST_CASE("spans of one SPANRING_SPAN site with other key sets each carry their own keys") {
  TestSegment t("site_keysets");
  // One site: the first key set its spans end with is kept in the site; every other set must
  // still be named right (through the thread's memo), and a set must never match another.
  const std::vector<std::vector<std::string>> want = {
      {"a", "b"}, {"a"}, {"a", "b", "c", "d"}, {"a", "b"}, {}, {"b", "a"},
      {"a", "b", "c", "e"}, {"x", "b"}, {"a", "b"}};
  const auto recs = t.records_of([&] {
    for (int round = 0; round < 3; ++round) {
      for (int shape = 0; shape < 9; ++shape) {
        SPANRING_SPAN(s, "site.keysets");
        add_key_set(s, shape);
      }
    }
  });
  REQUIRE(recs.size() == 3 * want.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    CAPTURE(i);
    REQUIRE((recs[i].flags() & kRecordCompact) != 0);
    const CompactRecord c = recs[i].compact();
    CHECK(t.string(c.name) == "site.keysets");
    const auto& keys = want[i % want.size()];
    REQUIRE((c.attrs & 7u) == keys.size());
    for (size_t k = 0; k < keys.size(); ++k) CHECK(t.string(c.keys[k]) == keys[k]);
  }
}

TEST_CASE("Span(name) calls with other names and key sets in one loop each name their spans right") {
  // Whatever caches a literal name's or key's id (the module's table, a descriptor of the call),
  // calls with other names in one function and one loop, one call whose name is a choice
  // between two literals of one length (which GCC also sees as a literal), and key sets that
  // differ from call to call and from round to round must each be named right.
  TestSegment t("site_implicit");
  const auto recs = t.records_of([] {
    for (int round = 0; round < 4; ++round) {
      { Span s{"implicit.a"}; s.attr("ka", round); }
      { Span s{"implicit.b"}; s.attr("kb", round).attr("kc", -round); }
      if (round % 2 == 0) {
        Span s{"implicit.a"};
        s.attr("kd", round);
      } else {
        Span s{"implicit.c"};
        s.attr("ka", round).attr("kb", round);
      }
      { Span s{"implicit.d"}; }
      { Span s{round % 2 == 0 ? "implicit.e0" : "implicit.e1"}; s.attr("ke", round); }
    }
  });
  REQUIRE(recs.size() == 4 * 5);
  struct Want {
    const char* name;
    std::vector<std::string> keys;
  };
  for (int round = 0; round < 4; ++round) {
    const Want want[5] = {{"implicit.a", {"ka"}},
                          {"implicit.b", {"kb", "kc"}},
                          round % 2 == 0 ? Want{"implicit.a", {"kd"}} : Want{"implicit.c", {"ka", "kb"}},
                          {"implicit.d", {}},
                          {round % 2 == 0 ? "implicit.e0" : "implicit.e1", {"ke"}}};
    for (int k = 0; k < 5; ++k) {
      CAPTURE(round);
      CAPTURE(k);
      const Slot& r = recs[static_cast<size_t>(round * 5 + k)];
      REQUIRE((r.flags() & kRecordCompact) != 0);
      const CompactRecord c = r.compact();
      CHECK(t.string(c.name) == want[k].name);
      REQUIRE((c.attrs & 7u) == want[k].keys.size());
      for (size_t i = 0; i < want[k].keys.size(); ++i) {
        CHECK(t.string(c.keys[i]) == want[k].keys[i]);
        CHECK(static_cast<int32_t>(c.values[i]) == (k == 1 && i == 1 ? -round : round));
      }
    }
  }
}

namespace {
// One Span call whose name is a choice between two literals of one length: GCC takes it for a
// literal, so the call has one descriptor of its own (span.h, detail::ImplicitSite) for both
// names, and each name carries its own key set. Not inlined: every caller runs the same call.
__attribute__((noinline)) void choice_span(bool bravo, int i) {
  Span s{bravo ? "choice.bravo" : "choice.alpha"};
  if (bravo)
    s.attr("kb", i).attr("kc", -i);
  else
    s.attr("ka", i);
}
}  // namespace

TEST_CASE("threads running one Span call with a choice of two names each name their spans right") {
  // Which name reaches the call's descriptor first differs from thread to thread (half start
  // with each); whichever it is, the other name's spans must keep their own name and keys.
  TestSegment t("site_choice", 4096);
  std::vector<std::pair<int, uint32_t>> rings;
  std::mutex m;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      for (int i = 0; i < 400; ++i) choice_span((i + th) % 2 == 0, i);
      const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
      for (uint32_t r = 0; r < t.seg.ring_count(); ++r)
        if (t.seg.ring(r).owner_tid == tid &&
            t.seg.ring(r).state.load(std::memory_order_acquire) == kRingActive) {
          std::lock_guard lock(m);
          rings.emplace_back(th, r);
        }
    });
  for (auto& th : threads) th.join();
  REQUIRE(rings.size() == 4);
  for (const auto& [th, r] : rings) {
    const auto recs = t.slots_of(r);
    REQUIRE(recs.size() == 400);
    for (size_t i = 0; i < recs.size(); ++i) {
      CAPTURE(th);
      CAPTURE(i);
      REQUIRE((recs[i].flags() & kRecordCompact) != 0);
      const CompactRecord c = recs[i].compact();
      const auto v = static_cast<int32_t>(i);
      if ((static_cast<int>(i) + th) % 2 == 0) {
        CHECK(t.string(c.name) == "choice.bravo");
        REQUIRE((c.attrs & 7u) == 2);
        CHECK(t.string(c.keys[0]) == "kb");
        CHECK(t.string(c.keys[1]) == "kc");
        CHECK(static_cast<int32_t>(c.values[0]) == v);
        CHECK(static_cast<int32_t>(c.values[1]) == -v);
      } else {
        CHECK(t.string(c.name) == "choice.alpha");
        REQUIRE((c.attrs & 7u) == 1);
        CHECK(t.string(c.keys[0]) == "ka");
        CHECK(static_cast<int32_t>(c.values[0]) == v);
      }
    }
  }
}

TEST_CASE("threads sharing a SPANRING_SPAN site name their spans right") {
  TestSegment t("site_threads", 4096);
  std::vector<uint32_t> rings;
  std::mutex m;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&, th] {
      for (int i = 0; i < 500; ++i) {
        SPANRING_SPAN(s, "site.threads");
        if ((i + th) % 3 == 0)
          s.attr("even", i).attr("thread", th);
        else
          s.attr("thread", th).attr("i", i);
      }
      const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
      for (uint32_t r = 0; r < t.seg.ring_count(); ++r)
        if (t.seg.ring(r).owner_tid == tid &&
            t.seg.ring(r).state.load(std::memory_order_acquire) == kRingActive) {
          std::lock_guard lock(m);
          rings.push_back(r);
        }
    });
  for (auto& th : threads) th.join();
  REQUIRE(rings.size() == 4);
  for (uint32_t r : rings) {
    const auto recs = t.slots_of(r);
    REQUIRE(recs.size() == 500);
    for (size_t i = 0; i < recs.size(); ++i) {
      REQUIRE((recs[i].flags() & kRecordCompact) != 0);
      const CompactRecord c = recs[i].compact();
      CHECK(t.string(c.name) == "site.threads");
      const std::string k0 = t.string(c.keys[0]);
      const std::string k1 = t.string(c.keys[1]);
      if (k0 == "even") {
        CHECK(k1 == "thread");
        CHECK(c.values[0] == i);
      } else {
        CHECK(k0 == "thread");
        CHECK(k1 == "i");
        CHECK(c.values[1] == i);
      }
    }
  }
}

TEST_CASE("a SPANRING_SPAN site's first span on a thread that has a state but no ring yet is recorded") {
  // The thread's state is mapped (set_thread_name) but holds no ring: its gate word is 0, and
  // the site's word before its first use (kSiteEmpty) must not pass the constructor's test
  // against it (an empty word 0 would, and the span would begin inline with no ring).
  TestSegment t("site_first");
  uint32_t ring = ~0u;
  std::thread th([&] {
    set_thread_name("site.first");
    REQUIRE(detail::t_self != nullptr);
    REQUIRE(detail::t_self->ring.shared() == nullptr);
    CHECK(detail::t_self->ring.gate_word() == 0);
    { SPANRING_SPAN(s, "site.first.span"); s.attr("k", 1); }
    { SPANRING_SPAN(s, "site.first.span"); s.attr("k", 2); }
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t r = 0; r < t.seg.ring_count(); ++r)
      if (t.seg.ring(r).owner_tid == tid) ring = r;
  });
  th.join();
  REQUIRE(ring != ~0u);
  const auto recs = t.slots_of(ring);
  REQUIRE(recs.size() == 2);
  for (size_t i = 0; i < recs.size(); ++i) {
    CAPTURE(i);
    REQUIRE((recs[i].flags() & kRecordCompact) != 0);
    CHECK(t.string(recs[i].compact().name) == "site.first.span");
    CHECK(recs[i].compact().values[0] == i + 1);
  }
}

TEST_CASE("a drop marked between the gate's test and the busy bit keeps the record out of the inline path") {
  // A signal handler of the thread that drops a record (kGateGap) after the inline path saw the
  // gate open and before it set kGateBusy: enter_busy must say the gate is no longer open, so
  // that the next record, which must carry its whole sequence number, is not written compact.
  TestSegment t("site_gate");
  const auto recs = t.records_of([&] {
    { SPANRING_SPAN(s, "gate.before"); }
    detail::ThreadState& ts = *detail::t_self;
    REQUIRE(detail::gate_open(ts));
    ts.ring.set_gate(ts.ring.gate() | kGateGap);  // what the handler's dropped record leaves
    CHECK(!detail::enter_busy(ts));
    detail::release_busy(ts);
    CHECK(ts.ring.gate() == (kGateOpen | kGateGap));
    CHECK(!detail::gate_open(ts));
    { SPANRING_SPAN(s, "gate.after.drop"); }  // ordinary: it clears the gap
    CHECK(detail::gate_open(ts));
    { SPANRING_SPAN(s, "gate.again"); }
  });
  REQUIRE(recs.size() == 3);
  CHECK((recs[0].flags() & kRecordCompact) != 0);
  CHECK((recs[1].flags() & kRecordCompact) == 0);
  CHECK((recs[2].flags() & kRecordCompact) != 0);
}

TEST_CASE("a drop marked while a span is open sends its end out of the inline path") {
  // A signal handler's drop (kGateGap) while a span begun inline is open: the end's one
  // compare-and-exchange of the gate (enter_open_busy) must fail, so the record, which must carry
  // its whole sequence number, is ordinary; the next span is compact again. A site's first
  // span fills it (through the library), so the gap is set in its second, which begins inline.
  // With an attribute the site's key-set tag (the gate word of a write) fails as well; without
  // one the exchange alone keeps the record out, so both are run. One segment: a test binary
  // past 16 attaches leaves a mapping's region object on the heap (Segment::leak), which
  // LeakSanitizer reports.
  TestSegment t("site_gap_open");
  const auto recs = t.records_of([&] {
    detail::ThreadState* ts = nullptr;
    for (int i = 0; i < 2; ++i) {
      SPANRING_SPAN(s, "gap.open.attr");
      s.attr("gk", 7);
      ts = detail::t_self;
      REQUIRE(detail::gate_open(*ts));
      if (i == 1) ts->ring.set_gate(ts->ring.gate() | kGateGap);  // a handler's dropped record
    }
    CHECK(detail::gate_open(*ts));
    for (int i = 0; i < 2; ++i) {
      SPANRING_SPAN(s, "gap.open");
      ts = detail::t_self;
      REQUIRE(detail::gate_open(*ts));
      if (i == 1) ts->ring.set_gate(ts->ring.gate() | kGateGap);
    }
    CHECK(detail::gate_open(*ts));
    { SPANRING_SPAN(s, "gap.after"); }
    { SPANRING_SPAN(s, "gap.after"); }
  });
  REQUIRE(recs.size() == 6);
  CHECK((recs[0].flags() & kRecordCompact) != 0);
  CHECK((recs[1].flags() & kRecordCompact) == 0);
  CHECK((recs[3].flags() & kRecordCompact) == 0);
  CHECK((recs[5].flags() & kRecordCompact) != 0);
}

// ---- SPANRING_SPAN's open-span note

TEST_CASE("an open SPANRING_SPAN is noted by its site's id, at its depth, in one word") {
  TestSegment t("site_open");
  uint32_t ring = ~0u;
  uint64_t word = 0;
  std::thread([&] {
    SPANRING_SPAN(outer, "open.site.outer");
    { SPANRING_SPAN(warm, "open.site.inner"); }  // the site's first span fills it
    SPANRING_SPAN(inner, "open.site.inner");
    word = spanring_site_inner.name.load(std::memory_order_relaxed);
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
      if (t.seg.ring(i).owner_tid == tid) ring = i;
    REQUIRE(ring != ~0u);
    const RingHeader& r = t.seg.ring(ring);
    CHECK(r.open_depth.load(std::memory_order_relaxed) == 2);
    const OpenSpan& o = r.open[1];
    CHECK(o.name_id == static_cast<uint16_t>(word));
    CHECK(o.name_len == 0);
    CHECK(o.inv == 0);
    // Timed by the counter wherever the inline path runs (a machine without an invariant TSC
    // times Spans by clock_gettime and begins them in the library: no kOpenTsc there).
    CHECK((o.flags & ~kOpenTsc) == 0);
    CHECK(o.reserved0 == 0);
    CHECK(o.reserved1 == 0);
    CHECK(r.open[0].name_id != 0);
  }).join();
  CHECK(t.string(static_cast<uint16_t>(word)) == "open.site.inner");
}

