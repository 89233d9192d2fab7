// SPANRING_EMIT, the call-site form of emit (span.h, detail::EmitSite), read straight from the
// ring slots and the string table (no drainer): the same record bytes as emit, a site's ids kept
// for the current attach and resolved again after another attach, and both forms of emit past
// depth 255 (kGateDeep). Its own executable: every
// case attaches to a segment of its own, and a process keeps at most 16 attached regions off
// the heap (Segment::leak). Compiled with -O2 (tests/meson.build): literal detection needs the
// optimizer.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>
#include <spanring/spanring.h>

#include "producer_test_util.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <string>

using namespace spanring;
using producer_test::Slot;
using producer_test::TestSegment;

#ifndef __OPTIMIZE__
#error "test_emit_site_producer.cpp must be compiled with optimization (literal detection)"
#endif

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

}  // namespace

// ---- SPANRING_EMIT: the call-site form of emit (span.h, detail::EmitSite)

namespace {
// One record of every emit shape, through emit (site == false) or SPANRING_EMIT.
void emit_shapes(bool site) {
  for (int round = 0; round < 3; ++round) {
    const int64_t ts = 1000 + round;
    if (site) {
      CHECK(SPANRING_EMIT("emit.same", ts, 20, "run_id=7 task_slot=42"));
      CHECK(SPANRING_EMIT("emit.same.noattrs", ts, 20, ""));
      CHECK(SPANRING_EMIT("emit.same.longdur", ts, int64_t{1} << 33, "x=1"));
      CHECK(!SPANRING_EMIT("emit.same.negative", -1, 20, "x=1"));
      CHECK(SPANRING_EMIT("emit.same.name.of.more.than.sixty.four.bytes.is.never.interned.in.the.table", ts, 20, "x=1"));
      Span s{"emit.same.parent"};
      CHECK(SPANRING_EMIT("emit.same.child", ts, 20, "depth=1"));
    } else {
      CHECK(emit("emit.same", ts, 20, "run_id=7 task_slot=42"));
      CHECK(emit("emit.same.noattrs", ts, 20, ""));
      CHECK(emit("emit.same.longdur", ts, int64_t{1} << 33, "x=1"));
      CHECK(!emit("emit.same.negative", -1, 20, "x=1"));
      CHECK(emit("emit.same.name.of.more.than.sixty.four.bytes.is.never.interned.in.the.table", ts, 20, "x=1"));
      Span s{"emit.same.parent"};
      CHECK(emit("emit.same.child", ts, 20, "depth=1"));
    }
  }
}

// One SPANRING_EMIT site, whose descriptor the caller gets.
const detail::EmitSite* emit_site_once(int64_t ts) {
  const detail::EmitSite* seen = nullptr;
  [&] {
    static constinit detail::EmitSite site;
    CHECK(emit(site, "emit.site.kept", ts, 5, "k=v"));
    seen = &site;
  }();
  return seen;
}
}  // namespace

TEST_CASE("SPANRING_EMIT records the same bytes as emit for the same records") {
  TestSegment t("emit_site_same");
  const auto plain = t.records_of([] { emit_shapes(false); });
  const auto site = t.records_of([] { emit_shapes(true); });
  REQUIRE(plain.size() == 3 * 7);
  REQUIRE(site.size() == plain.size());
  size_t compact = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    CAPTURE(i);
    CHECK(plain[i].flags() == site[i].flags());
    CHECK(record_bytes(plain[i]) == record_bytes(site[i]));
    // The caller's times (the parent Span's are the counter's: they differ).
    if ((site[i].flags() & kRecordCompact) != 0 && plain[i].compact().ts_ns < 100000) {
      CHECK(plain[i].compact().ts_ns == site[i].compact().ts_ns);
      CHECK(plain[i].compact().dur_ns == site[i].compact().dur_ns);
    } else if ((site[i].flags() & kRecordCompact) == 0) {
      CHECK(plain[i].header().ts_ns == site[i].header().ts_ns);
      CHECK(plain[i].header().dur_ns == site[i].header().dur_ns);
    }
    compact += (site[i].flags() & kRecordCompact) != 0;
  }
  // Per round: the two literal records, the child (depth 1) and its parent span.
  CHECK(compact == 3 * 4);
}

TEST_CASE("a SPANRING_EMIT site keeps both ids for the current attach and writes them inline") {
  TestSegment t("emit_site_kept");
  const uint32_t generation = detail::g_attach_generation.load(std::memory_order_relaxed);
  const detail::EmitSite* seen = nullptr;
  const auto recs = t.records_of([&] {
    for (int i = 0; i < 3; ++i) seen = emit_site_once(100 + i);
  });
  REQUIRE(seen != nullptr);
  REQUIRE(recs.size() == 3);
  // The word is the gate word of a thread with an open gate on a ring of this generation (what
  // emit's compare-and-exchange compares); the ids are in head, the record's word 6.
  const uint64_t word = seen->word.load(std::memory_order_relaxed);
  CHECK(word == (uint64_t{generation} << 32 | kGateOpen));
  const uint64_t head = seen->head.load(std::memory_order_relaxed);
  const auto name_id = static_cast<uint16_t>(head >> 32);
  CHECK(head == RingWriter::compact_word6(kRecordCompact, name_id,
                                          static_cast<uint16_t>(head >> 48)));
  CHECK(t.string(name_id) == "emit.site.kept");
  CHECK(t.string(static_cast<uint16_t>(head >> 48)) == "k=v");
  for (size_t i = 0; i < recs.size(); ++i) {
    CAPTURE(i);
    REQUIRE((recs[i].flags() & kRecordCompact) != 0);
    const CompactRecord c = recs[i].compact();
    CHECK(c.name == name_id);
    CHECK(c.keys[0] == static_cast<uint16_t>(head >> 48));
    CHECK(c.attrs == kCompactAttrsText);
    CHECK(c.ts_ns == 100 + i);
    CHECK(c.dur_ns == 5);
    CHECK(c.seq_lo == i);
  }
}

TEST_CASE("attaching again makes a SPANRING_EMIT site resolve its ids in the new segment") {
  uint16_t first_name = 0, first_attrs = 0;
  {
    TestSegment t1("emit_site_reattach1");
    const auto recs = t1.records_of([] { emit_site_once(1); emit_site_once(2); });
    REQUIRE(recs.size() == 2);
    REQUIRE((recs[1].flags() & kRecordCompact) != 0);
    first_name = recs[1].compact().name;
    first_attrs = recs[1].compact().keys[0];
  }
  // Other strings at the first segment's ids: a site that kept them would name these.
  TestSegment t2("emit_site_reattach2");
  // (TestSegment attached the process to t2; its table is empty, so occupy the old ids.)
  occupy(t2.seg, first_name, "decoy.name");
  occupy(t2.seg, first_attrs, "decoy=attrs");
  const auto recs = t2.records_of([] { emit_site_once(3); emit_site_once(4); });
  REQUIRE(recs.size() == 2);
  for (size_t i = 0; i < recs.size(); ++i) {
    CAPTURE(i);
    REQUIRE((recs[i].flags() & kRecordCompact) != 0);
    const CompactRecord c = recs[i].compact();
    CHECK(t2.string(c.name) == "emit.site.kept");
    CHECK(t2.string(c.keys[0]) == "k=v");
    CHECK(c.ts_ns == 3 + i);
  }
}

// ---- a site whose record cannot be compact (span.h, EmitSite: kEmitSiteOrdinary)

namespace {
// One SPANRING_EMIT site and one plain emit call (its own site on x86-64), both with names the
// test keeps out of the table; each site's descriptor is the same at every call.
__attribute__((noinline)) bool emit_ordinary_site(int64_t ts) {
  return SPANRING_EMIT("emit.ordinary.site", ts, 5, "k=v");
}
__attribute__((noinline)) bool emit_ordinary_plain(int64_t ts) {
  return emit("emit.ordinary.plain", ts, 5, "k=v");
}
}  // namespace

TEST_CASE("a forked child whose thread lost its ring never writes inline at a site that cannot be compact") {
  // The child's forking thread keeps its ring's epoch with a gate of 0 (no ring): a site word
  // of the same generation must not equal that gate word less an id, or emit's
  // compare-and-exchange (enter_site_busy) would take the gate and write a compact record
  // through the parent's stale ring writer.
  TestSegment t("emit_ordinary_fork");
  // Both names kept out of the table: each site holds the word of a record that cannot be
  // compact.
  t.fill_probes("emit.ordinary.site");
  t.fill_probes("emit.ordinary.plain");
  uint32_t parent_ring = ~0u;
  uint64_t parent_head = 0;
  int status = -1;
  pid_t child = -1;
  std::thread([&] {
    CHECK(emit_ordinary_site(10));
    CHECK(emit_ordinary_plain(11));
    CHECK(emit_ordinary_site(12));
    CHECK(emit_ordinary_plain(13));
    const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    for (uint32_t i = 0; i < t.seg.ring_count(); ++i)
      if (t.seg.ring(i).owner_tid == tid) parent_ring = i;
    REQUIRE(parent_ring != ~0u);
    parent_head = t.seg.ring(parent_ring).head.load(std::memory_order_acquire);
    child = ::fork();
    if (child == 0) {
      // The child: both sites again, on a ring of its own (claimed by the library), then exit.
      const bool ok = emit_ordinary_site(20) && emit_ordinary_plain(21);
      ::_exit(ok ? 0 : 1);
    }
    if (child > 0) ::waitpid(child, &status, 0);
  }).join();
  REQUIRE(child > 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent's ring holds its own four ordinary records and nothing from the child.
  CHECK(t.seg.ring(parent_ring).head.load(std::memory_order_acquire) == parent_head);
  const auto parent = t.slots_of(parent_ring);
  REQUIRE(parent.size() == 4);
  for (const Slot& s : parent) CHECK((s.flags() & kRecordCompact) == 0);
  bool found = false;
  for (uint32_t i = 0; i < t.seg.ring_count(); ++i) {
    if (t.seg.ring(i).owner_pid != static_cast<uint32_t>(child)) continue;
    const auto recs = t.slots_of(i);
    REQUIRE(recs.size() == 2);
    for (size_t k = 0; k < recs.size(); ++k) {
      CAPTURE(k);
      REQUIRE((recs[k].flags() & kRecordCompact) == 0);
      const RecordHeader h = recs[k].header();
      CHECK(h.ts_ns == 20 + k);
      CHECK(recs[k].payload.substr(0, h.name_len) ==
            (k == 0 ? "emit.ordinary.site" : "emit.ordinary.plain"));
    }
    found = true;
  }
  CHECK(found);
}

// ---- depth past 255 (kGateDeep, ring_writer.h): a compact record's depth is one byte, so an
// emit on a thread with more than 255 spans open must go through the library (an ordinary
// record with the whole depth), which the inline emit knows only from the gate.

namespace {
// The caller's emits at one depth: ts `ts` (emit) and ts + 1 (SPANRING_EMIT), tagged by it.
void emit_both(int64_t ts) {
  CHECK(emit("emit.deep", ts, 5, "k=v"));
  CHECK(SPANRING_EMIT("emit.deep.site", ts + 1, 5, "k=v"));
}

// The depth and form of the record with caller time `ts` (spans' times are the counter's).
struct Found {
  bool compact = false;
  uint32_t depth = ~0u;
  int count = 0;
};
Found find_ts(const std::vector<Slot>& recs, uint64_t ts) {
  Found f;
  for (const Slot& s : recs) {
    if ((s.flags() & kRecordCompact) != 0) {
      const CompactRecord c = s.compact();
      if (c.ts_ns != ts) continue;
      f = Found{true, c.depth, f.count + 1};
    } else {
      const RecordHeader h = s.header();
      if (h.ts_ns != ts) continue;
      f = Found{false, h.depth, f.count + 1};
    }
  }
  return f;
}
}  // namespace

TEST_CASE("past depth 255 the gate counts kGateDeep and emit writes the whole depth") {
  TestSegment t("emit_deep", 4096);
  uint32_t gate_at[4] = {};
  const auto recs = t.records_of([&] {
    emit_both(100);  // claims the ring: depth 0, inline
    std::deque<Span> open;
    while (open.size() < 300) open.emplace_back("emit.deep.parent");
    gate_at[0] = detail::t_self->ring.gate();
    emit_both(3000);
    while (open.size() > 256) open.pop_back();
    gate_at[1] = detail::t_self->ring.gate();
    emit_both(2560);
    open.pop_back();
    gate_at[2] = detail::t_self->ring.gate();
    emit_both(2550);
    while (!open.empty()) open.pop_back();
    gate_at[3] = detail::t_self->ring.gate();
    emit_both(4000);
  });
  // Deep: exactly one kGateDeep counted (the gate otherwise open); back to exactly open at 255.
  CHECK(gate_at[0] == (kGateOpen | kGateDeep));
  CHECK(gate_at[1] == (kGateOpen | kGateDeep));
  CHECK(gate_at[2] == kGateOpen);
  CHECK(gate_at[3] == kGateOpen);
  // depth, whether the record is compact, for emit and SPANRING_EMIT at each depth
  const struct {
    uint64_t ts;
    uint32_t depth;
    bool compact;
  } want[] = {{100, 0, true}, {3000, 300, false}, {2560, 256, false}, {2550, 255, true},
              {4000, 0, true}};
  for (const auto& w : want)
    for (uint64_t ts : {w.ts, w.ts + 1}) {
      CAPTURE(ts);
      const Found f = find_ts(recs, ts);
      CHECK(f.count == 1);
      CHECK(f.depth == w.depth);
      CHECK(f.compact == w.compact);
    }
}

// ---- a plain emit's own call site (detail::ImplicitEmitSite, x86-64): one emitted call whose
// name and attribute text are each a choice of two literals of one length (GCC takes them for
// literals, and the call has one site), so the site must serve only the pair that claimed it.

namespace {
__attribute__((noinline)) bool emit_choice(unsigned i, int64_t ts) {
  return emit((i & 1) != 0 ? "choice.alpha" : "choice.bravo", ts, 5,
              (i & 2) != 0 ? "k=first" : "k=other");
}
}  // namespace

TEST_CASE("a plain emit whose strings are a choice of literals names each record by its own strings") {
  TestSegment t("emit_choice", 1024);
  const auto recs = t.records_of([] {
    for (unsigned round = 0; round < 3; ++round)
      for (unsigned i = 0; i < 4; ++i) CHECK(emit_choice(i, 1000 + 10 * round + i));
  });
  REQUIRE(recs.size() == 12);
  size_t compact = 0;
  for (size_t k = 0; k < recs.size(); ++k) {
    CAPTURE(k);
    const unsigned i = static_cast<unsigned>(k % 4);
    const char* want_name = (i & 1) != 0 ? "choice.alpha" : "choice.bravo";
    const char* want_attrs = (i & 2) != 0 ? "k=first" : "k=other";
    REQUIRE((recs[k].flags() & kRecordCompact) != 0);
    const CompactRecord c = recs[k].compact();
    CHECK(c.ts_ns == 1000 + 10 * (k / 4) + i);
    CHECK(t.string(c.name) == want_name);
    REQUIRE(c.attrs == kCompactAttrsText);
    CHECK(t.string(c.keys[0]) == want_attrs);
    ++compact;
  }
  CHECK(compact == 12);
}

// ---- the closed state: what t_self points at on a thread without a state of its own

namespace {

// t_self on a new thread that never recorded.
detail::ThreadState* fresh_thread_self() {
  detail::ThreadState* p = nullptr;
  std::thread([&] { p = detail::t_self; }).join();
  return p;
}

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

// Whether `p` is the closed state as the library built it: zero but for early_ns, which is
// kClosedEarlyNs (no explicit record passes ts_announced on it).
bool closed_as_built(const detail::ThreadState* p) {
  if (p->early_ns != detail::kClosedEarlyNs) return false;
  unsigned char b[sizeof *p];
  std::memcpy(b, p, sizeof b);
  std::memset(b + offsetof(detail::ThreadState, early_ns), 0, sizeof p->early_ns);
  return all_zero(b, sizeof b);
}

// A record's name, compact or ordinary.
std::string record_name(TestSegment& t, const Slot& s) {
  if ((s.flags() & kRecordCompact) != 0) return t.string(s.compact().name);
  return s.payload.substr(0, s.header().name_len);
}

}  // namespace

TEST_CASE("a thread's first record through each API takes a state and leaves the closed state unwritten") {
  // The inline paths test no pointer: a thread that never recorded points at the closed state,
  // whose gate must fail each of their tests, so that the first record goes to the library
  // (which gives the thread a state) and nothing is written into the closed state (read-only:
  // a write would fault).
  detail::ThreadState* const closed = fresh_thread_self();
  REQUIRE(closed != nullptr);
  CHECK(fresh_thread_self() == closed);  // one closed state for every stateless thread
  CHECK(closed->ring.gate_word() == 0);
  CHECK(!detail::gate_open(*closed));
  CHECK(!detail::text_gate_open(*closed));
  // No ts passes on it, so emit's compare-and-exchange (enter_site_busy), which writes the
  // gate word even when it fails, never runs on its read-only memory.
  CHECK(!detail::ts_announced(*closed, 0));
  CHECK(!detail::ts_announced(*closed, INT64_MAX));
  CHECK(closed_as_built(closed));
  struct First {
    const char* name;
    std::function<void()> record;
  };
  const First firsts[] = {
      {"closed.span", [] { Span s("closed.span"); s.attr("k", 1); }},
      {"closed.span.noattr", [] { Span s("closed.span.noattr"); }},
      {"closed.site.span", [] { SPANRING_SPAN(s, "closed.site.span"); s.attr("k", 2); }},
      {"closed.emit", [] { CHECK(emit("closed.emit", 2000, 5, "k=v")); }},
      {"closed.emit.noattr", [] { CHECK(emit("closed.emit.noattr", 2000, 5)); }},
      {"closed.site.emit", [] { CHECK(SPANRING_EMIT("closed.site.emit", 2000, 5, "k=v")); }},
      {"closed.c", [] {
         spanring_span c{};
         c.timestamp_ns = 2000;
         c.duration_ns = 5;
         c.name = "closed.c";
         c.attributes = "k=v";
         spanring_emit(&c);
       }},
  };
  for (const First& f : firsts) {
    CAPTURE(f.name);
    TestSegment t("closed_state");  // a segment each: 4 rings, not reclaimed without a drainer
    bool had_closed = false;
    bool took_state = false;
    const auto recs = t.records_of([&] {
      had_closed = detail::t_self == closed;
      f.record();
      took_state = detail::t_self != closed && detail::t_self != nullptr;
    });
    CHECK(had_closed);
    CHECK(took_state);
    REQUIRE(recs.size() == 1);
    CHECK(record_name(t, recs[0]) == f.name);
  }
  CHECK(closed_as_built(closed));
}

namespace {

struct AfterExit {
  pthread_key_t key;
  detail::ThreadState* closed;
  int rounds = 0;
  bool was_closed = false;
  bool recorded = false;
  bool took_state = false;
};

// A key destructor that runs after the library's (which gives the thread's state back and
// points t_self at the closed state): glibc runs destructors in rounds while any key has a
// value, so it sets its key again until t_self is the closed state, then records, as a signal
// handler or another library's destructor might at thread exit.
void after_exit(void* arg) {
  auto& a = *static_cast<AfterExit*>(arg);
  ++a.rounds;
  if (detail::t_self != a.closed && a.rounds < 3) {
    pthread_setspecific(a.key, &a);
    return;
  }
  a.was_closed = detail::t_self == a.closed;
  a.recorded = SPANRING_EMIT("closed.after.exit", 2000, 5, "");
  a.took_state = detail::t_self != a.closed;
}

}  // namespace

TEST_CASE("thread exit points t_self at the closed state, and a record after it takes a state again") {
  TestSegment t("closed_exit", 1024);
  AfterExit a{};
  a.closed = fresh_thread_self();
  REQUIRE(pthread_key_create(&a.key, after_exit) == 0);
  std::thread([&] {
    { SPANRING_SPAN(s, "closed.before.exit"); }
    REQUIRE(detail::t_self != a.closed);
    pthread_setspecific(a.key, &a);
  }).join();
  pthread_key_delete(a.key);
  CHECK(a.was_closed);
  CHECK(a.recorded);
  CHECK(a.took_state);
  CHECK(closed_as_built(a.closed));
}

// In this file, not test_site_producer.cpp: that binary attaches 16 segments already (a 17th
// leaves its region object on the heap, Segment::leak keeps 16, which LeakSanitizer reports).
TEST_CASE("a span begun inline that lasts 2^32 counter ticks or more is ordinary, with its whole duration") {
  // The inline end tests the counter's difference from the start (detail::ticks_since): from
  // 2^32 ticks on it does not fit a compact record's dur_ns, so the record goes through the
  // library (end_at), which must be given the end the span had (the start plus the
  // difference). The site's first span fills it, so the second is the one begun inline. About
  // 1.7 s of waiting on a 2.6 GHz counter (no timing is asserted: the wait ends on the counter).
  // A counter slower than ~0.55 GHz (aarch64's generic timer runs at 1 GHz or less, 62.5 MHz
  // under qemu-user) takes more than 8 s to get there: skipped, with the rate said.
  {
    timespec a{}, b{};
    ::clock_gettime(CLOCK_MONOTONIC, &a);
    const uint64_t c0 = detail::read_tsc();
    ::usleep(50000);
    const uint64_t c1 = detail::read_tsc();
    ::clock_gettime(CLOCK_MONOTONIC, &b);
    const double ns = static_cast<double>(b.tv_sec - a.tv_sec) * 1e9 +
                      static_cast<double>(b.tv_nsec - a.tv_nsec);
    const double ghz = static_cast<double>(c1 - c0) / ns;
    const double seconds = static_cast<double>((uint64_t{1} << 32) + (uint64_t{1} << 28)) / ghz / 1e9;
    if (!(seconds <= 8.0)) {
      MESSAGE("the counter runs at " << ghz << " GHz here: 2^32 ticks take " << seconds
                                     << " s; skipped");
      return;
    }
  }
  TestSegment t("site_long");
  uint64_t waited = 0;
  bool inline_path = false;
  const auto recs = t.records_of([&] {
    for (int i = 0; i < 2; ++i) {
      SPANRING_SPAN(s, "long.span");
      if (i == 1) {
        // A machine without an invariant TSC times Spans by clock_gettime (kGateClock): no
        // inline path to test there.
        inline_path = detail::gate_open(*detail::t_self);
        if (!inline_path) break;
        const uint64_t t0 = detail::read_tsc();
        while (detail::read_tsc() - t0 < (uint64_t{1} << 32) + (uint64_t{1} << 28)) ::usleep(20000);
        waited = detail::read_tsc() - t0;
      }
    }
    { SPANRING_SPAN(s, "long.after"); }
    { SPANRING_SPAN(s, "long.after"); }
  });
  if (!inline_path) {
    MESSAGE("Spans are not timed by the counter here: skipped");
    return;
  }
  REQUIRE(recs.size() == 4);
  CHECK((recs[0].flags() & kRecordCompact) != 0);
  REQUIRE((recs[1].flags() & kRecordCompact) == 0);
  const RecordHeader h = recs[1].header();
  CHECK((h.flags & kRecordTsc) != 0);
  CHECK(h.dur_ns >= waited);
  CHECK(h.dur_ns < waited + (uint64_t{1} << 28));
  CHECK(h.ts_ns > recs[0].compact().ts_ns);
  CHECK((recs[3].flags() & kRecordCompact) != 0);
}

