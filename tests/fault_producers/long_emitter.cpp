// long_emitter: over-long and odd inputs through every producer API, and a tiny ring driven to
// its edge (test_mp_fault_long_input.cpp).
//
//   long_emitter --out FILE.jsonl --mode cases
//     Emits every case of long_cases.h through each API it applies to (long_cases::apis_of),
//     in order, from one thread, inside Invocation(42, 0xbeef) (span and emit take inv and hid
//     from it; the C API passes inv=7 hid=0xabc depth=0). JSON line: {"pid", "tid",
//     "emitted": [{"case": index, "api", "stored": emit()'s result or null}]}.
//   long_emitter --out FILE.jsonl --mode tiny [--flood N] [--bursts B]
//     Run with --ring-records 16. Emits tiny_record(s) for s = 0, 1, ... with spanring::emit:
//     first N records (default 20,000) as fast as it can (the drainer falls behind and the ring
//     is full most of the time); then B bursts (default 400), each starting from an empty ring
//     (it waits, watching the ring's head and tail through a read-only view of the segment,
//     until the drainer has consumed everything) and going on until 3 records after the first
//     refusal. Before each burst record it reads the ring's free room: a refusal while 1 to
//     need-1 slots were free is an edge refusal; a refusal with room for the record would be a
//     bug. Each record's sequence number in its ring is s (the thread emits nothing else).
//     JSON line: {"pid", "tid", "emitted", "dropped": [s of every record emit() refused],
//     "five_slot_refused", "edge_refusals", "refused_with_room"}.
#include "emitter_util.h"

#include <CLI/CLI.hpp>
#include "long_cases.h"
#include "segment_peek.h"

#include <spanring/span.h>
#include <spanring/spanring.h>

#include <time.h>

#include <string>
#include <vector>

using fault_emitter::append_json_line;
using fault_emitter::fail;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

int run_cases(const std::string& out) {
  const std::vector<long_cases::Case> cases = long_cases::cases();
  json emitted = json::array();
  spanring::Invocation scope{42, 0xbeef};
  for (size_t i = 0; i < cases.size(); ++i) {
    const long_cases::Case& c = cases[i];
    const std::string attrs = long_cases::joined_attrs(c);
    const char* attrs_arg = c.null_attrs ? nullptr : attrs.c_str();
    for (const std::string& api : long_cases::apis_of(c)) {
      json e = {{"case", i}, {"api", api}, {"stored", nullptr}};
      if (api == "span") {
        spanring::Span s{c.name.c_str()};
        for (const long_cases::Token& t : c.tokens) {
          switch (t.kind) {
            case long_cases::Token::kText: s.attr(t.key, std::string_view(t.text)); break;
            case long_cases::Token::kI64: s.attr(t.key, t.i); break;
            case long_cases::Token::kU64: s.attr(t.key, t.u); break;
          }
        }
      } else if (api == "emit") {
        e["stored"] = spanring::emit(c.name.c_str(), spanring::now_ns(), 1000 + int64_t(i),
                                     attrs_arg);
      } else {
        spanring_span r{};
        r.invocation_id = 7;
        r.callable_hash = 0xabc;
        r.timestamp_ns = spanring_now_ns();
        r.duration_ns = 2000 + int64_t(i);
        r.name = c.null_name ? nullptr : c.name.c_str();
        r.attributes = attrs_arg;
        spanring_emit(&r);
      }
      emitted.push_back(e);
    }
  }
  append_json_line(out, json{{"pid", ::getpid()}, {"tid", gettid_now()}, {"emitted", emitted}});
  return 0;
}

// Waits until the drainer has consumed everything in the ring (tail == head).
void wait_until_empty(const fault_emitter::SegmentPeek& seg, uint32_t ring) {
  const int64_t deadline = spanring::now_ns() + 5'000'000'000;
  for (;;) {
    const fault_emitter::RingSnapshot r = seg.ring(ring);
    if (r.tail == r.head) return;
    if (spanring::now_ns() > deadline) fail("the drainer did not empty the ring in 5 s");
    const timespec ts{0, 100 * 1000};
    ::nanosleep(&ts, nullptr);
  }
}

int run_tiny(const std::string& out, uint64_t flood, uint64_t bursts) {
  fault_emitter::SegmentPeek seg;
  std::string why;
  if (!seg.open_from_environment(&why)) fail("cannot view the segment: %s", why.c_str());
  const uint64_t capacity = seg.ring_capacity();
  // Built before the flood, so that it outruns the drainer (it only emits).
  std::vector<long_cases::TinyRecord> ready;
  for (uint64_t s = 0; s < flood; ++s) ready.push_back(long_cases::tiny_record(s));
  std::vector<uint64_t> dropped;
  uint64_t five_refused = 0;
  uint64_t s = 0;
  const auto emit = [&](const long_cases::TinyRecord& r) {
    const bool stored = spanring::emit(r.name.c_str(), spanring::now_ns(), 1, r.attrs.c_str());
    if (!stored) dropped.push_back(s);
    if (!stored && long_cases::tiny_slots(s) == 5) ++five_refused;
    ++s;
    return stored;
  };
  // Phase 1: a flood; the ring is full most of the time.
  for (const long_cases::TinyRecord& r : ready) emit(r);
  const int64_t ring = seg.find_ring(static_cast<uint32_t>(::getpid()),
                                     static_cast<uint32_t>(gettid_now()));
  if (ring < 0) fail("no ring of mine in the segment");
  wait_until_empty(seg, static_cast<uint32_t>(ring));

  // Phase 2: bursts from an empty ring. Before each record, the free room as the drainer has
  // left it (the producer sees at least this much: tail only grows); a refusal with room for
  // the record would be a bug, a refusal with 1..need-1 slots free is the edge.
  uint64_t edge_refusals = 0;
  uint64_t refused_with_room = 0;
  for (uint64_t b = 0; b < bursts; ++b) {
    int after_refusal = -1;
    while (after_refusal < 3) {
      const fault_emitter::RingSnapshot before = seg.ring(static_cast<uint32_t>(ring));
      const uint64_t free = capacity - (before.head - before.tail);
      const uint64_t need = long_cases::tiny_slots(s);
      if (emit(long_cases::tiny_record(s))) {
        if (after_refusal >= 0) ++after_refusal;
        continue;
      }
      if (free >= need) ++refused_with_room;
      if (free > 0 && free < need) ++edge_refusals;
      ++after_refusal;
    }
    wait_until_empty(seg, static_cast<uint32_t>(ring));
  }
  append_json_line(out, json{{"pid", ::getpid()},
                             {"tid", gettid_now()},
                             {"emitted", s},
                             {"dropped", dropped},
                             {"five_slot_refused", five_refused},
                             {"edge_refusals", edge_refusals},
                             {"refused_with_room", refused_with_room}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  std::string mode;
  uint64_t flood = 20000;
  uint64_t bursts = 400;
  CLI::App app{"long_emitter: over-long input, and a 16-slot ring at its edge"};
  app.add_option("--out", out, "JSON lines file")->required();
  app.add_option("--mode", mode, "cases or tiny")
      ->required()
      ->check(CLI::IsMember({"cases", "tiny"}));
  app.add_option("--flood", flood, "tiny: records emitted flat out first");
  app.add_option("--bursts", bursts, "tiny: bursts from an empty ring");
  CLI11_PARSE(app, argc, argv);
  if (mode == "cases") return run_cases(out);
  return run_tiny(out, flood, bursts);
}
