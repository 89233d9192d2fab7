// Over-long and odd input (long_emitter.cpp, long_cases.h): 1 MiB names, 1,000 attributes,
// 1 MiB attribute strings, every byte value, NULs, integer extremes, invalid names, through
// spanring::Span, spanring::emit and spanring_emit. Each output field must be exactly the
// spec's encoding and cut (computed here by fault::spec_encode from the spec text, plus the
// spec's own worked example spelled out), the program never aborts, and an invalid record is a
// drop with reason=invalid. Then a 16-slot ring filled by 1- to 5-slot records as fast as the
// producer can: a record that does not fit is dropped whole and counted, never published in
// part; every record written is complete and the drop lines name exactly the missing ones.
#include "fault_check.h"
#include "long_cases.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace spanring_test;
using namespace fault;
using nlohmann::json;

namespace {

// One line of the emitter's thread, in file order.
struct Event {
  bool is_span = false;
  SpanLine span;
  DropsLine drop;
  uint64_t line_no = 0;
};

std::vector<Event> events_of(const std::string& path, uint64_t pid, uint64_t tid) {
  std::vector<Event> ev;
  const std::string text = read_file(path);
  size_t pos = 0;
  uint64_t line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    end = end == std::string::npos ? text.size() : end + 1;
    const ParseResult r = parse_line(std::string_view(text).substr(pos, end - pos));
    pos = end;
    if (!r.ok()) continue;  // reported by the invariant check
    Event e;
    e.line_no = line_no;
    if (r.line.kind == LineKind::kSpan && r.line.span.pid == pid && r.line.span.tid == tid) {
      e.is_span = true;
      e.span = r.line.span;
      ev.push_back(e);
    } else if (r.line.kind == LineKind::kDrops && r.line.drops.pid == pid &&
               r.line.drops.tid == tid) {
      e.drop = r.line.drops;
      ev.push_back(e);
    }
  }
  return ev;
}

// The expected output of emission k (= ring sequence number k) of the cases run.
struct Expected {
  std::string what;  // case id and api, for messages
  bool invalid = false;
  std::string name;
  std::string attrs;
  uint64_t inv = 0;
  uint64_t hid = 0;
};

std::vector<Expected> expected_cases(const json& emitted) {
  const std::vector<long_cases::Case> cases = long_cases::cases();
  std::vector<Expected> x;
  for (const json& e : emitted) {
    const long_cases::Case& c = cases.at(e.at("case").get<size_t>());
    const std::string api = e.at("api").get<std::string>();
    Expected ex;
    ex.what = c.id + " via " + api;
    ex.name = c.null_name ? "" : spec_encode(c.name, true);
    ex.invalid = ex.name.empty();
    ex.attrs = c.null_attrs ? "" : spec_encode(long_cases::joined_attrs(c), false);
    ex.inv = api == "c" ? 7 : 42;
    ex.hid = api == "c" ? 0xabc : 0xbeef;
    x.push_back(ex);
  }
  return x;
}

std::vector<std::string> compare_cases(const std::vector<Expected>& want,
                                       const std::vector<Event>& got) {
  std::vector<std::string> p;
  size_t g = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const Expected& w = want[k];
    const std::string at = "emission " + std::to_string(k) + " (" + w.what + ")";
    if (g >= got.size()) {
      p.push_back(at + ": no line for it");
      continue;
    }
    const Event& e = got[g++];
    const std::string line = " at line " + std::to_string(e.line_no);
    if (w.invalid) {
      if (e.is_span || e.drop.reason != "invalid" || e.drop.dropped != 1 ||
          e.drop.first_seq != k || e.drop.last_seq != k) {
        p.push_back(at + ": expected a drop line dropped=1 first_seq=last_seq=" +
                    std::to_string(k) + " reason=invalid" + line);
      }
      continue;
    }
    if (!e.is_span) {
      p.push_back(at + ": a drop line (reason=" + e.drop.reason + ") instead of its record" +
                  line);
      continue;
    }
    const SpanLine& s = e.span;
    if (s.name != w.name) {
      p.push_back(at + ": name=" + printable(s.name) + " (" + std::to_string(s.name.size()) +
                  " bytes), expected " + printable(w.name) + " (" +
                  std::to_string(w.name.size()) + " bytes)" + line);
    }
    if (s.attrs != w.attrs) {
      p.push_back(at + ": attrs=" + printable(s.attrs, 200) + " (" +
                  std::to_string(s.attrs.size()) + " bytes), expected " +
                  printable(w.attrs, 200) + " (" + std::to_string(w.attrs.size()) + " bytes)" +
                  line);
    }
    if (s.inv != w.inv || s.hid != w.hid || s.depth != 0) {
      p.push_back(at + ": inv=" + std::to_string(s.inv) + " hid=" + std::to_string(s.hid) +
                  " depth=" + std::to_string(s.depth) + ", expected inv=" +
                  std::to_string(w.inv) + " hid=" + std::to_string(w.hid) + " depth=0" + line);
    }
  }
  for (; g < got.size(); ++g) {
    p.push_back("an extra line of the emitter's thread at line " + std::to_string(got[g].line_no));
  }
  return p;
}

// The tiny ring's accounting: the drop lines name exactly the records emit() refused, and with
// the written ones they cover 0..emitted-1 exactly once. `reported` and `refused` sorted.
std::vector<std::string> coverage_problems(const std::vector<uint64_t>& written,
                                           const std::vector<uint64_t>& reported,
                                           const std::vector<uint64_t>& refused,
                                           uint64_t emitted) {
  std::vector<std::string> p;
  if (reported != refused) {
    p.push_back("drop lines report " + std::to_string(reported.size()) +
                " sequence numbers, emit() refused " + std::to_string(refused.size()));
  }
  std::vector<uint64_t> all = written;
  all.insert(all.end(), reported.begin(), reported.end());
  std::sort(all.begin(), all.end());
  bool exact = all.size() == emitted;
  for (uint64_t i = 0; exact && i < emitted; ++i) exact = all[i] == i;
  if (!exact) {
    p.push_back("written (" + std::to_string(written.size()) + ") and reported (" +
                std::to_string(reported.size()) + ") records do not cover 0.." +
                std::to_string(emitted - 1) + " exactly once");
  }
  return p;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("over-long names and attributes and every byte value are encoded and cut exactly as "
          "the spec says") {
  TempDir tmp;
  // run_emitter REQUIREs exit 0: the emitter never aborts.
  const EmitterRun e = run_emitter(tmp, "FAULT_LONG_EMITTER", {}, {"--mode", "cases"}, 20);
  INFO("spanring run: ", e.run.describe());
  REQUIRE(e.emitted.size() == 1);
  const json& em = e.emitted[0];
  const uint64_t pid = em.at("pid").get<uint64_t>();
  const uint64_t tid = em.at("tid").get<uint64_t>();

  const TraceFacts facts = scan_trace(e.out);
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  const std::vector<Expected> want = expected_cases(em.at("emitted"));
  const std::vector<Event> got = events_of(e.out, pid, tid);
  const std::vector<std::string> diff = compare_cases(want, got);
  CHECK_MESSAGE(diff.empty(), describe(diff, 40));

  // The counts: every valid record written, every invalid one dropped, nothing else.
  uint64_t invalid = 0;
  for (const Expected& w : want) invalid += w.invalid ? 1 : 0;
  CHECK(invalid == 7);  // name_empty x3, name_starts_nul x3, name_null x1
  CHECK(e.summary.written == want.size() - invalid);
  CHECK(e.summary.dropped == invalid);
  CHECK(facts.dropped_with_reason("invalid") == invalid);
  // emit() says whether it stored the record.
  for (size_t k = 0; k < want.size(); ++k) {
    const json& e = em.at("emitted").at(k);
    if (e.at("api") == "emit") {
      CHECK_MESSAGE(e.at("stored").get<bool>() == !want[k].invalid, want[k].what,
                    ": emit() returned ", e.at("stored").get<bool>());
    }
  }

  // Spelled out from the spec's text, independently of spec_encode: the worked example, and a
  // 1 MiB name (5 + 59 bytes reach the cap; the input went on, so the last unit goes and `~`
  // follows).
  const std::vector<long_cases::Case> cases = long_cases::cases();
  for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
    const long_cases::Case& c = cases.at(em.at("emitted").at(k).at("case").get<size_t>());
    if (!got[k].is_span) continue;
    if (c.id == "attrs_spec_example") {
      CHECK(got[k].span.attrs == "%0A" + std::string(186, 'x') + "~");
    }
    if (c.id == "name_1mib") CHECK(got[k].span.name == "long." + std::string(58, 'n') + "~");
    if (c.id == "attrs_1000_tokens") {
      // 192 bytes of "k0=0 k1=1 ..." would end mid-token; the output is at the cap, so its last
      // byte goes and `~` follows.
      CHECK(got[k].span.attrs.size() == 192);
      CHECK(got[k].span.attrs.rfind("k0=0 k1=1 k2=2 ", 0) == 0);
      CHECK(got[k].span.attrs.back() == '~');
    }
  }

  // Negative controls: a changed byte, a missing line and a drop in place of a record are each
  // caught.
  if (!got.empty()) {
    std::vector<Event> changed = got;
    for (Event& e : changed) {
      if (e.is_span && !e.span.attrs.empty()) {
        e.span.attrs.back() = e.span.attrs.back() == 'x' ? 'y' : 'x';
        break;
      }
    }
    CHECK_FALSE(compare_cases(want, changed).empty());
    std::vector<Event> shorter(got.begin(), got.end() - 1);
    CHECK_FALSE(compare_cases(want, shorter).empty());
    std::vector<Event> dropped = got;
    dropped.front().is_span = false;
    dropped.front().drop.reason = "ring_full";
    CHECK_FALSE(compare_cases(want, dropped).empty());
  }
}

TEST_CASE("a record larger than the free room of a full 16-slot ring is dropped whole and "
          "counted, never published in part") {
  TempDir tmp;

  // The records' shapes, as the emitter builds them: the cycle's slot counts are real.
  for (uint64_t s = 0; s < 100; ++s) {
    const long_cases::TinyRecord r = long_cases::tiny_record(s);
    REQUIRE(long_cases::slots_for(r.name.size(), r.attrs.size()) == long_cases::tiny_slots(s));
  }

  const EmitterRun e =
      run_emitter(tmp, "FAULT_LONG_EMITTER", {"--ring-records", "16"}, {"--mode", "tiny"}, 25);
  INFO("spanring run: ", e.run.describe());
  CHECK_MESSAGE(e.run.err.find("16 slots") != std::string::npos, "the ring is not 16 slots");
  REQUIRE(e.emitted.size() == 1);
  const json& em = e.emitted[0];
  const uint64_t pid = em.at("pid").get<uint64_t>();
  const uint64_t tid = em.at("tid").get<uint64_t>();
  const uint64_t emitted = em.at("emitted").get<uint64_t>();
  const auto refused = em.at("dropped").get<std::vector<uint64_t>>();
  INFO("emitted ", emitted, ", refused by emit() ", refused.size(), ", five-slot refused ",
       em.at("five_slot_refused").get<uint64_t>());
  REQUIRE_MESSAGE(em.at("five_slot_refused").get<uint64_t>() >= 1,
                  "the ring never refused a 5-slot record: the edge was not reached");
  // Bursts from an empty ring of 16 slots, records of 1-5 slots: a refusal with some room left
  // happens in most bursts. A refusal with room enough for the record must never happen.
  CHECK_MESSAGE(em.at("edge_refusals").get<uint64_t>() >= 1,
                "no record was refused with 1..need-1 slots free: the edge was not reached");
  CHECK_MESSAGE(em.at("refused_with_room").get<uint64_t>() == 0,
                em.at("refused_with_room").get<uint64_t>(),
                " record(s) refused although the ring had room for them");

  // Every record written is whole: its name and attrs are exactly those of its s.
  std::vector<std::string> bad;
  std::vector<uint64_t> written;
  const TraceFacts facts = scan_trace(e.out, [&](const SpanLine& sp, uint64_t line_no) {
    const auto s = attr_u64(sp, "s");  // the first token; the padding holds no space
    if (sp.pid != pid || sp.tid != tid || !s || *s >= emitted) {
      bad.push_back("line " + std::to_string(line_no) + ": a record of no emitted s: " +
                    printable(sp.attrs, 40));
      return;
    }
    const long_cases::TinyRecord r = long_cases::tiny_record(*s);
    if (sp.name != spec_encode(r.name, true) || sp.attrs != spec_encode(r.attrs, false)) {
      bad.push_back("line " + std::to_string(line_no) + ": record s=" + std::to_string(*s) +
                    " (" + std::to_string(long_cases::tiny_slots(*s)) + " slots) is not whole: "
                    "name=" + printable(sp.name) + " attrs=" + printable(sp.attrs, 200));
    }
    if (!written.empty() && *s <= written.back()) {
      bad.push_back("line " + std::to_string(line_no) + ": s=" + std::to_string(*s) +
                    " after s=" + std::to_string(written.back()));
    }
    written.push_back(*s);
  });
  CHECK_MESSAGE(bad.empty(), describe(bad));
  const std::vector<std::string> inv = invariant_problems(facts, e.summary, e.run.err, e.out);
  CHECK_MESSAGE(inv.empty(), describe(inv));

  // The drop lines name exactly the records emit() refused; with the written ones they cover
  // every s once.
  std::vector<uint64_t> reported;
  for (const DropsLine& d : facts.drops) {
    CHECK_MESSAGE(d.reason == "ring_full", "drop line with reason=", d.reason);
    CHECK(d.pid == pid);
    CHECK(d.tid == tid);
    for (uint64_t s = d.first_seq; s <= d.last_seq && s < emitted; ++s) reported.push_back(s);
  }
  std::sort(reported.begin(), reported.end());
  const std::vector<std::string> cov = coverage_problems(written, reported, refused, emitted);
  CHECK_MESSAGE(cov.empty(), describe(cov));
  // Negative controls: a record both written and reported, or neither, is caught.
  if (!written.empty() && !reported.empty()) {
    std::vector<uint64_t> twice = reported;
    twice.push_back(written.front());
    std::sort(twice.begin(), twice.end());
    CHECK_FALSE(coverage_problems(written, twice, twice, emitted).empty());
    const std::vector<uint64_t> fewer(written.begin() + 1, written.end());
    CHECK_FALSE(coverage_problems(fewer, reported, refused, emitted).empty());
  }
  CHECK(e.summary.written == emitted - refused.size());
  CHECK(e.summary.dropped == refused.size());
  MESSAGE("16-slot ring: ", emitted, " records emitted, ", e.summary.written, " written, ",
          e.summary.dropped, " dropped on ", facts.drops.size(), " lines; ",
          em.at("five_slot_refused").get<uint64_t>(), " five-slot records refused; ",
          em.at("edge_refusals").get<uint64_t>(), " refusals with 1..need-1 slots free");
}

}  // TEST_SUITE
