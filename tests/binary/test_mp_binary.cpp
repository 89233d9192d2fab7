// The binary format end to end on the example workload: `spanring run --format binary` on the
// l3 demo, `spanring convert` and `spanring report` through the CLI.
//
// Byte identity: the run also writes the very same events as [STRACE] text through a TextSink
// into a second file (`--also-strace`), so the converted binary can be compared byte for byte
// with text the drainer wrote from the same records, not from a second run.
#include "binary_util.h"
#include "format/binary_format.h"
#include "src/string_table.h"
#include "mp_util.h"
#include "tools/chrome_json.h"
#include "tools/convert.h"
#include "traced_run.h"

#include <spanring/segment.h>

#include <doctest/doctest.h>
#include <random>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>

using namespace spanring_test;
using binary_test::fix_crcs;
using binary_test::read_bytes;
using nlohmann::json;

namespace {

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

void write_file(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

// One traced run of the demo at its default size, shared by the tests below; its temporary
// directory is removed at exit.
struct DemoRun {
  TempDir tmp;
  std::string spanring = exe_from_env("SPANRING_EXE");
  std::string demo = exe_from_env("L3_DEMO");
  std::string binary = tmp.file("demo.sptrace");
  std::string text = tmp.file("demo.strace");
  std::string expect = tmp.file("expect.json");
  // spanring_run, not run_traced: the run is made once for all the tests below, and
  // demo_run() checks it in each of them. 4,096-slot rings: the drainer sends a buffer once a
  // quarter of a ring waits on it, which cuts the demo's trace into the several blocks the
  // tests below take apart (a default ring's quarter is more than the whole demo).
  RunResult run = spanring_run(binary, {"--format", "binary", "--also-strace", text,
                                        "--ring-records", "4096"},
                               {demo, "--expect", expect}, 40);
  std::optional<Summary> summary = parse_summary(run.err);
};

const DemoRun& demo_run() {
  static const DemoRun d;
  INFO("spanring run: ", d.run.describe());
  REQUIRE(d.run.exit_code == 0);
  REQUIRE(d.summary.has_value());
  return d;
}

std::map<std::string, uint64_t> expected_counts(const std::string& path) {
  std::map<std::string, uint64_t> want;
  const json j = json::parse(read_file(path));  // named: items() of a temporary would dangle
  for (const auto& [name, count] : j.items())
    want[name] = count.get<uint64_t>();
  return want;
}

// How many events of each type (format/binary_format.h) the blocks of a binary trace hold;
// walks the framing only (the reader checks the rest).
std::map<int, uint64_t> event_types(const std::string& bytes) {
  std::map<int, uint64_t> n;
  size_t at = spanring::kFileHeaderBytes;
  while (at + spanring::kBlockHeaderBytes <= bytes.size()) {
    spanring::BlockHeader bh;
    std::memcpy(&bh, bytes.data() + at, sizeof bh);
    size_t e = at + sizeof bh;
    const size_t end = e + bh.payload_bytes;
    if (end > bytes.size()) break;
    while (e + sizeof(spanring::EventHeader) <= end) {
      spanring::EventHeader eh;
      std::memcpy(&eh, bytes.data() + e, sizeof eh);
      ++n[eh.type];
      e += sizeof eh + eh.body_bytes;
    }
    at = end;
  }
  return n;
}

}  // namespace

TEST_SUITE("binary") {

TEST_CASE("corrupt string ids and string table entries while draining binary: each record one counted drop, a bad frame a quarantine, the file readable") {
  // The victim thread of kinds_emitter writes 50 compact spans, then pauses; this test writes
  // into its ring as a hostile process would: compact records naming an empty table entry, an
  // entry whose bytes no longer match its hash, and a key id past the table, then a good one,
  // then one whose sequence number does not follow (ring corruption).
  const std::string spanring = exe_from_env("SPANRING_EXE");
  const std::string emitter = exe_from_env("KINDS_EMITTER");
  TempDir tmp;
  const std::string binary = tmp.file("victim.sptrace");
  const std::string dir = tmp.file("");
  RunResult run;
  std::thread runner([&] {
    run = spanring_run(binary, {"--format", "binary"},
                       {emitter, "--seed", "3", "--count", "200", "--threads", "1", "--victim",
                        dir},
                       60);
  });
  std::string ready;
  for (int i = 0; i < 4000 && !std::filesystem::exists(dir + "/ready"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ready = read_file(dir + "/ready");
  std::string segment_name;
  uint32_t tid = 0;
  {
    std::istringstream in(ready);
    in >> segment_name >> tid;
  }
  bool wrote = false;
  if (!segment_name.empty() && tid != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // phase 1 drained
    spanring::Segment seg = spanring::Segment::open(segment_name);
    uint32_t index = UINT32_MAX;
    for (uint32_t i = 0; i < seg.ring_count(); ++i)
      if (seg.ring(i).owner_tid == tid &&
          seg.ring(i).state.load(std::memory_order_acquire) == spanring::kRingActive)
        index = i;
    if (index != UINT32_MAX) {
      using namespace spanring;
      RingHeader& r = seg.ring(index);
      StringEntry* table = seg.view().strings();
      const uint16_t victim_id = intern(table, "k.victim", 8, nullptr);  // the victim's own
      const uint16_t key_id = intern(table, "v", 1, nullptr);
      const uint16_t bad_id = intern(table, "k.corrupted", 11, nullptr);
      table[bad_id].bytes[0] = 'X';  // its hash no longer matches
      uint16_t empty_id = 0;
      for (uint16_t id = 4095; id > 0 && empty_id == 0; --id)
        if (table[id].state.load(std::memory_order_acquire) == kStringEmpty) empty_id = id;
      const uint64_t head = r.head.load(std::memory_order_acquire);
      auto compact = [&](uint32_t seq_lo, uint16_t name, uint16_t key) {
        CompactRecord c{};
        c.ts_ns = 123456789;
        c.dur_ns = 5;
        c.seq_lo = seq_lo;
        c.slots = 1;
        c.flags = kRecordCompact;
        c.name = name;
        c.keys[0] = key;
        c.values[0] = 77;
        c.attrs = 1;
        return c;
      };
      const CompactRecord recs[] = {compact(50, empty_id, key_id), compact(51, bad_id, key_id),
                                    compact(52, victim_id, 0xffff), compact(53, victim_id, key_id),
                                    compact(99, victim_id, key_id)};
      const uint64_t mask = seg.ring_capacity() - 1;
      for (uint64_t k = 0; k < 5; ++k)
        std::memcpy(seg.ring_slots(index) + ((head + k) & mask) * kSlotBytes, &recs[k],
                    sizeof recs[k]);
      r.head.store(head + 5, std::memory_order_release);
      wrote = victim_id != 0 && key_id != 0 && bad_id != 0 && empty_id != 0;
    }
  }
  { std::ofstream go(dir + "/go"); }
  runner.join();
  INFO("spanring run: ", run.describe());
  REQUIRE(wrote);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.err, "a record is dropped as corrupt"));
  CHECK(contains(run.err, "quarantined: compact record at slot"));
  const RunResult conv = run_process({spanring, "convert", binary, "--to", "strace"});
  INFO("convert: ", conv.describe());
  REQUIRE(conv.exit_code == 0);
  CHECK(conv.err.empty());
  const std::string t = std::to_string(tid);
  for (const char* seq : {"50", "51", "52"})
    CHECK_MESSAGE(contains(conv.out, "tid=" + t + " dropped=1 first_seq=" + seq + " last_seq=" +
                                         seq + " reason=corrupt\n"),
                  "no corrupt drop for seq ", seq);
  size_t victims = 0;
  for (size_t at = 0; (at = conv.out.find("tid=" + t + " inv=0 hid=0 depth=0 name=k.victim ", at)) !=
                      std::string::npos;
       ++at)
    ++victims;
  CHECK(victims == 51);  // 50 of its own and the good one written into its ring
  CHECK(contains(conv.out, "name=k.victim ts=123456789 dur=5 v=77\n"));
}

// Converts `file` alone; REQUIREs a clean conversion and returns the text.
std::string convert_alone(const std::string& spanring, const std::string& file) {
  const RunResult conv = run_process({spanring, "convert", file, "--to", "strace"});
  INFO("convert ", file, ": ", conv.describe());
  REQUIRE(conv.exit_code == 0);
  CHECK(conv.err.empty());  // no damage note: every string its runs name is defined in it
  return conv.out;
}

TEST_CASE("rotated binary files and flight-recorder snapshots each define their own strings and convert alone") {
  const std::string spanring = exe_from_env("SPANRING_EXE");
  const std::string emitter = exe_from_env("KINDS_EMITTER");
  SUBCASE("--rotate") {
    TempDir tmp;
    const std::string out = tmp.file("rot.sptrace");
    const RunResult run = spanring_run(out, {"--format", "binary", "--rotate", "128K:1000"},
                                       {emitter, "--seed", "5", "--count", "6000", "--threads",
                                        "2"},
                                       60);
    INFO("spanring run: ", run.describe());
    REQUIRE(run.exit_code == 0);
    uint32_t files = 0;
    uint64_t spans = 0;
    for (uint32_t n = 0;; ++n) {
      const std::string f = n == 0 ? out : out + "." + std::to_string(n);
      if (!std::filesystem::exists(f)) break;
      ++files;
      CAPTURE(f);
      const std::string bytes = read_file(f);
      const std::map<int, uint64_t> types = event_types(bytes);
      const std::string text = convert_alone(spanring, f);
      CHECK(!contains(text, "reason=corrupt"));
      if (n == 0 && !contains(text, "[STRACE] ")) {
        // The newest file can start with the run's last buffer and hold no span (only what the
        // final poll found: a drop count, or nothing): it needs no definitions, and it
        // converts alone (above). Said, so that a run that shows it can be read back.
        MESSAGE(f, ": no span; ", bytes.size(), " bytes, ", types.size(), " event types");
        continue;
      }
      CHECK(types.count(7) == 1);
      CHECK(types.count(8) == 1);
      // Its own anchor before its first span (one process): a file reads alone.
      CHECK(text.find("[CLOCK_ANCHOR] ") < text.find("[STRACE] "));
      for (size_t at = 0; (at = text.find("[STRACE] ", at)) != std::string::npos; ++at) ++spans;
    }
    MESSAGE(files, " rotated files, ", spans, " spans");
    CHECK(files >= 3);
    const std::optional<Summary> summary = parse_summary(run.err);
    REQUIRE(summary.has_value());
    CHECK(spans == summary->written);
  }
  SUBCASE("--flight-recorder") {
    TempDir tmp;
    const std::string out = tmp.file("fr.sptrace");
    // 1 MiB window of 128 KiB blocks: the early blocks, where the strings were first defined,
    // are pushed out long before the snapshot at exit.
    const RunResult run = spanring_run(out, {"--format", "binary", "--flight-recorder", "1M",
                                             "--snapshot-at-exit"},
                                       {emitter, "--seed", "6", "--count", "20000", "--threads",
                                        "2"},
                                       60);
    INFO("spanring run: ", run.describe());
    REQUIRE(run.exit_code == 0);
    const std::string snap = tmp.file("fr.snap-1.sptrace");  // the first snapshot: at exit
    REQUIRE(std::filesystem::exists(snap));
    const std::string bytes = read_file(snap);
    const std::map<int, uint64_t> types = event_types(bytes);
    CHECK(types.count(7) == 1);
    CHECK(types.count(8) == 1);
    const std::string text = convert_alone(spanring, snap);
    CHECK(contains(text, "reason=overwritten"));  // the window lost its oldest blocks
    CHECK(!contains(text, "reason=corrupt"));
    CHECK(contains(text, "name=k.compact4 "));
  }
}

TEST_CASE("every record kind, drops and unfinished spans: binary v4 converts to the drainer's own text") {
  // Small rings and bursts: ring_full drops; invalid markers; compact, packed, text and cut
  // records; clk=dev; unfinished spans of a process that _exits inside them. The run writes
  // the binary trace (runs of ring records and string definitions) and, from the same records,
  // the [STRACE] text (--also-strace); convert must give that text byte for byte.
  const std::string spanring = exe_from_env("SPANRING_EXE");
  const std::string emitter = exe_from_env("KINDS_EMITTER");
  for (const std::string seed : {"1", "7", "42"}) {
    CAPTURE(seed);
    TempDir tmp;
    const std::string binary = tmp.file("kinds.sptrace");
    const std::string text = tmp.file("kinds.strace");
    const RunResult run = spanring_run(
        binary, {"--format", "binary", "--also-strace", text, "--ring-records", "1024"},
        {emitter, "--seed", seed, "--count", "4000", "--threads", "3", "--burst", "1500",
         "--unfinished", "1"},
        60);
    INFO("spanring run: ", run.describe());
    REQUIRE(run.exit_code == 0);
    const std::string bytes = read_file(binary);
    REQUIRE(bytes.size() > spanring::kFileHeaderBytes);
    uint32_t version = 0;
    std::memcpy(&version, bytes.data() + 8, sizeof version);
    CHECK(version == 4);
    const std::map<int, uint64_t> types = event_types(bytes);
    CHECK(types.count(7) == 1);  // string definitions
    CHECK(types.count(8) == 1);  // runs of ring records
    CHECK(types.count(9) == 1);  // the drainer's clock samples (runs keep TSC times)
    const std::string converted = tmp.file("converted.strace");
    const RunResult conv =
        run_process({spanring, "convert", binary, "--to", "strace", "-o", converted});
    INFO("convert: ", conv.describe());
    REQUIRE(conv.exit_code == 0);
    CHECK(conv.err.empty());
    const std::string direct = read_file(text);
    const std::string via_binary = read_file(converted);
    REQUIRE(!direct.empty());
    CHECK_MESSAGE(via_binary == direct, "binary -> strace differs from the direct text at byte ",
                  std::mismatch(via_binary.begin(), via_binary.end(), direct.begin(),
                                direct.end()).first - via_binary.begin());
    // Every kind made it into the text.
    for (const std::string what : {"name=k.compact4 ", "name=k.packed ", "name=k.five ", "name=k.text ",
                             "name=k.emit ", "name=k.long ", "clk=dev", "reason=invalid",
                             "reason=ring_full", "[SPANRING_UNFINISHED]", "%25pc"})
      CHECK_MESSAGE(contains(direct, what), what);
  }
}

TEST_CASE("the demo's binary trace converts to exactly the [STRACE] text of the same records") {
  const DemoRun& d = demo_run();
  CHECK(contains(d.run.err, "(spanring binary trace, docs/binary-format.md)"));
  CHECK(d.summary->dropped == 0);

  const std::string converted = d.tmp.file("converted.strace");
  const RunResult conv = run_process({d.spanring, "convert", d.binary, "--to", "strace", "-o",
                                      converted});
  INFO("convert: ", conv.describe());
  REQUIRE(conv.exit_code == 0);
  CHECK(conv.err.empty());
  const std::string direct = read_file(d.text);
  const std::string via_binary = read_file(converted);
  REQUIRE(!direct.empty());
  CHECK(via_binary.size() == direct.size());
  CHECK_MESSAGE(via_binary == direct, "binary -> strace differs from the direct text at byte ",
                std::mismatch(via_binary.begin(), via_binary.end(), direct.begin(),
                              direct.end()).first - via_binary.begin());

  // The direct text is itself a good [STRACE] trace (the suite's own strict parser).
  const Trace trace = load_trace(d.text);
  check_trace_invariants(trace, *d.summary, d.run.err, d.binary);

  // stdin works the same.
  const RunResult piped = run_process({"/bin/sh", "-c", "\"$0\" convert - --to strace < \"$1\"",
                                       d.spanring, d.binary});
  CHECK(piped.exit_code == 0);
  CHECK(piped.out == direct);

  const size_t binary_bytes = read_file(d.binary).size();
  MESSAGE("binary trace ", binary_bytes, " bytes, [STRACE] text ", direct.size(), " bytes");
  CHECK(binary_bytes < direct.size());
}

TEST_CASE("report on the demo's binary trace counts exactly what the demo emitted") {
  const DemoRun& d = demo_run();
  const RunResult rep = run_process({d.spanring, "report", "--json", d.binary});
  INFO("report: ", rep.describe());
  REQUIRE(rep.exit_code == 0);
  const json r = json::parse(rep.out);
  CHECK(r["status"] == "complete");
  CHECK(r["records"] == d.summary->written);
  CHECK(r["dropped"] == 0);
  CHECK(r["unfinished"] == 0);
  CHECK(r["processes"] == d.summary->processes);
  CHECK(r["threads"] == d.summary->threads);
  std::map<std::string, uint64_t> got;
  for (const json& row : r["names"]) {
    got[row["name"]] = row["count"];
    CHECK(row["p50_ns"] <= row["p99_ns"]);
    CHECK(row["p99_ns"] <= row["max_ns"]);
  }
  CHECK(got == expected_counts(d.expect));

  // The text of the same run reports the same numbers (thread names and command lines aside,
  // which only the binary format carries).
  const RunResult rep_text = run_process({d.spanring, "report", "--json", d.text});
  REQUIRE(rep_text.exit_code == 0);
  json a = r, b = json::parse(rep_text.out);
  CHECK(a["names"] == b["names"]);
  CHECK(a["records"] == b["records"]);

  // The table form names every thread.
  const RunResult table = run_process({d.spanring, "report", d.binary});
  REQUIRE(table.exit_code == 0);
  CHECK(contains(table.out, "l3-orch"));
  CHECK(contains(table.out, "node.dispatch"));
}

TEST_CASE("the demo as Chrome JSON parses strictly and has what Perfetto needs") {
  const DemoRun& d = demo_run();
  const std::string out = d.tmp.file("demo.json");
  const RunResult conv = run_process({d.spanring, "convert", d.binary, "--to", "chrome", "-o",
                                      out});
  INFO("convert: ", conv.describe());
  REQUIRE(conv.exit_code == 0);
  json j;
  REQUIRE_NOTHROW(j = json::parse(read_file(out)));  // strict: throws on any JSON error
  REQUIRE(j["traceEvents"].is_array());

  std::map<uint64_t, std::string> process_names;             // pid -> name
  std::set<std::pair<uint64_t, uint64_t>> named_threads;     // (pid, tid)
  std::set<std::pair<uint64_t, uint64_t>> used_lanes;
  std::map<uint64_t, int> starts, finishes;                  // flow id -> count
  std::set<uint64_t> host_pids, device_pids;
  struct Slice { double ts, dur; json args; std::string name; };
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Slice>> slices;
  std::vector<json> flows;
  uint64_t x = 0, device = 0;
  for (const json& e : j["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    const std::string ph = e["ph"];
    REQUIRE(e["pid"].is_number_unsigned());
    REQUIRE(e["tid"].is_number_unsigned());
    const uint64_t pid = e["pid"], tid = e["tid"];
    if (ph == "M") {
      if (e["name"] == "process_name") process_names[pid] = e["args"]["name"];
      if (e["name"] == "thread_name") named_threads.insert({pid, tid});
      continue;
    }
    used_lanes.insert({pid, tid});
    if (ph == "X") {
      ++x;
      for (const char* k : {"name", "ts", "dur", "args", "cat"}) REQUIRE(e.contains(k));
      REQUIRE(e["ts"].is_number());
      REQUIRE(e["dur"].is_number());
      REQUIRE(e["args"].is_object());
      CHECK(e["args"].contains("inv"));
      CHECK(e["args"].contains("depth"));
      const bool dev = e["args"].contains("clk") && e["args"]["clk"] == "dev";
      CHECK(dev == (e["cat"] == "device"));
      if (dev) {
        ++device;
        device_pids.insert(pid);
      } else {
        host_pids.insert(pid);
      }
      slices[{pid, tid}].push_back(Slice{e["ts"], e["dur"], e["args"], e["name"]});
      if (e["name"] == "chip.run") {
        // Integer-looking attribute values are numbers.
        CHECK(e["args"]["run_id"].is_number_integer());
        CHECK(e["args"]["task_slot"].is_number_integer());
      }
    } else if (ph == "s" || ph == "f") {
      (ph == "s" ? starts : finishes)[e["id"]]++;
      flows.push_back(e);
    } else {
      CHECK(ph == "i");
    }
  }
  CHECK(x == d.summary->written);
  CHECK(device == expected_counts(d.expect)["chip.run.runner_run.device_wall"]);
  // Every process and every lane is named.
  for (const auto& [pid, tid] : used_lanes) {
    CHECK_MESSAGE(process_names.count(pid) == 1, "pid ", pid, " has no process_name");
    CHECK_MESSAGE(named_threads.count({pid, tid}) == 1, "lane ", pid, "/", tid, " unnamed");
  }
  // Host processes are named from their command line; device spans stay off host pids.
  for (uint64_t pid : host_pids) {
    CHECK(pid < spanring::kDevicePidBase);
    CHECK(contains(process_names[pid], "spanring-l3-demo"));
    CHECK(device_pids.count(pid) == 0);
    CHECK(j["otherData"].contains("clock_anchor_" + std::to_string(pid)));
  }
  for (uint64_t pid : device_pids) {
    CHECK(pid >= spanring::kDevicePidBase);
    CHECK(contains(process_names[pid], "device clock of pid " +
                                           std::to_string(pid - spanring::kDevicePidBase)));
  }
  // One flow per node.submit, each a pair s/f: from inside an node.submit to inside the
  // node.dispatch of the same (pid, run_id, task_slot).
  CHECK(starts.size() == expected_counts(d.expect)["node.submit"]);
  CHECK(starts.size() == finishes.size());
  for (const auto& [id, n] : starts) CHECK((n == 1 && finishes[id] == 1));
  auto enclosing = [&](const json& f, const std::string& name) -> const Slice* {
    const double ts = f["ts"];
    for (const Slice& s : slices[{f["pid"], f["tid"]}])
      if (s.name == name && s.ts <= ts && ts <= s.ts + s.dur) return &s;
    return nullptr;
  };
  std::map<uint64_t, const Slice*> from;
  for (const json& f : flows) {
    const Slice* s = enclosing(f, f["ph"] == "s" ? "node.submit" : "node.dispatch");
    REQUIRE_MESSAGE(s != nullptr, "flow end not inside its span: ", f.dump());
    if (f["ph"] == "s") {
      from[f["id"]] = s;
      CHECK(f["cat"] == "flow");
    }
  }
  for (const json& f : flows) {
    if (f["ph"] != "f") continue;
    CHECK(f["bp"] == "e");
    const Slice* to = enclosing(f, "node.dispatch");
    const Slice* src = from[f["id"]];
    REQUIRE(src != nullptr);
    CHECK(src->args["run_id"] == to->args["run_id"]);
    CHECK(src->args["task_slot"] == to->args["task_slot"]);
  }
}

TEST_CASE("the demo's binary trace cut at every 997th byte converts up to its last block") {
  const DemoRun& d = demo_run();
  const std::string bytes = read_file(d.binary);
  const std::vector<uint64_t> ends = binary_test::block_ends(bytes);
  REQUIRE(ends.back() == bytes.size());
  MESSAGE((ends.size() - 1), " blocks in ", bytes.size(), " bytes");
  auto convert = [](const std::string& in_bytes, spanring::ReadResult* res) {
    std::string text;
    spanring::TraceInput in = spanring::TraceInput::memory(in_bytes, "cut");
    spanring::TraceOutput out = spanring::TraceOutput::memory(&text);
    *res = spanring::convert_trace(in, out, spanring::ConvertTo::kStrace);
    out.finish();
    return text;
  };
  std::map<uint64_t, std::string> at_block;  // block end -> text of everything before it
  const std::string full = read_file(d.text);
  for (uint64_t cut = 997; cut < bytes.size(); cut += 997) {
    CAPTURE(cut);
    uint64_t good = 0;
    for (uint64_t e : ends)
      if (e <= cut) good = e;
    if (!at_block.count(good)) {
      spanring::ReadResult r;
      at_block[good] = convert(bytes.substr(0, good), &r);
      REQUIRE(r.status == spanring::ReadResult::Status::kComplete);
      REQUIRE(full.compare(0, at_block[good].size(), at_block[good]) == 0);  // a prefix
    }
    spanring::ReadResult r;
    const std::string text = convert(bytes.substr(0, cut), &r);
    if (good == cut) {
      CHECK(r.status == spanring::ReadResult::Status::kComplete);
    } else {
      CHECK(r.status == spanring::ReadResult::Status::kCut);
      CHECK(contains(r.message, "the file is cut at byte " + std::to_string(cut)));
    }
    CHECK(r.good_bytes == good);
    CHECK(text == at_block[good]);
  }
  // Through the CLI: exit 0, the message on stderr, the output up to the last complete block.
  // Every cut is inside the file ((size - 1) / 997: a file whose size is a multiple of 997 is
  // not cut by its own size); one that lands on a block's end is a complete file, no message.
  for (uint64_t cut : {uint64_t{997} * 3, uint64_t{997} * (bytes.size() / 997 / 2),
                       uint64_t{997} * ((bytes.size() - 1) / 997)}) {
    CAPTURE(cut);
    const std::string cut_path = d.tmp.file("cut.sptrace");
    const std::string out_path = d.tmp.file("cut.strace");
    write_file(cut_path, bytes.substr(0, cut));
    const RunResult conv = run_process({d.spanring, "convert", cut_path, "--to", "strace", "-o",
                                        out_path});
    CHECK(conv.exit_code == 0);
    uint64_t good = 0;
    for (uint64_t e : ends)
      if (e <= cut) good = e;
    if (good == cut) {
      CHECK_FALSE(contains(conv.err, "the file is cut"));
    } else {
      CHECK(contains(conv.err, "the file is cut at byte " + std::to_string(cut)));
      CHECK(contains(conv.err, "the [STRACE] text output holds everything before the cut"));
    }
    REQUIRE(at_block.count(good) == 1);
    CHECK(read_file(out_path) == at_block[good]);
  }
}

TEST_CASE("corrupted demo traces are refused through the CLI with the right message") {
  const DemoRun& d = demo_run();
  const std::string bytes = read_file(d.binary);
  const std::vector<uint64_t> ends = binary_test::block_ends(bytes);
  REQUIRE(ends.size() >= 3);
  const std::string path = d.tmp.file("bad.sptrace");
  auto refuse = [&](std::string f, const std::string& want, const char* to) {
    CAPTURE(want);
    write_file(path, f);
    const RunResult r = run_process({d.spanring, "convert", path, "--to", to, "-o",
                                     d.tmp.file("bad.out")});
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(contains(r.err, want), r.err);
    CHECK_MESSAGE(!std::filesystem::exists(d.tmp.file("bad.out")),
                  "a rejected input left an output file");
    const RunResult rep = run_process({d.spanring, "report", path});
    CHECK(rep.exit_code == 1);
    CHECK_MESSAGE(contains(rep.err, want), rep.err);
  };
  const uint64_t b1 = ends[1];
  std::string flipped = bytes;
  flipped[b1 + spanring::kBlockHeaderBytes + 100] ^= 0x40;
  refuse(flipped, "block 1 at byte " + std::to_string(b1) + ": payload checksum mismatch",
         "strace");
  refuse(flipped, "payload checksum mismatch", "chrome");
  std::string magic = bytes;
  magic[0] = 'X';
  refuse(magic, "is not a trace", "chrome");
  std::string version = bytes;
  version[8] = 7;
  refuse(version, "byte 8: unsupported format version 7", "strace");
  std::string huge = bytes;
  spanring::BlockHeader h;
  std::memcpy(&h, huge.data() + b1, sizeof h);
  h.payload_bytes = 0x7fffffff;
  h.header_crc = spanring::crc32c(&h, offsetof(spanring::BlockHeader, header_crc));
  std::memcpy(huge.data() + b1, &h, sizeof h);
  refuse(huge, "claims a length of 2147483647 bytes, more than the limit", "strace");
}

TEST_CASE("a binary drain killed after a commit is resumed by spanring drain on the same file") {
  const std::string spanring = exe_from_env("SPANRING_EXE");
  const std::string demo = exe_from_env("L3_DEMO");
  TempDir tmp;
  const std::string file = tmp.file("resumed.sptrace");
  const std::string expect = tmp.file("expect.json");
  // An earlier trace of the same name: `run` keeps it as FILE.old, and the resume below must
  // neither move the file being resumed nor touch FILE.old.
  write_file(file, "an earlier trace\n");
  // The drainer kills itself right after its 5th commit (a test point); the demo goes on,
  // writing into the segment, and run_process waits for it (it holds the output pipes).
  const RunResult run = run_process({"/usr/bin/env", "SPANRING_TEST_POINT=drainer_committed",
                                     "SPANRING_TEST_POINT_HIT=5", spanring, "run", "--format",
                                     "binary", "-o", file, "--", demo, "--expect", expect});
  if (run.term_signal != SIGKILL) {
    MESSAGE("test points are compiled out (release build?): nothing to resume; ",
            run.describe());
    return;
  }
  const std::optional<std::string> segment_line = segment_from_stderr(run.err);
  REQUIRE(segment_line.has_value());
  const std::string& segment = *segment_line;
  CHECK(contains(run.err, "--format binary"));  // the restart hint names the format
  CHECK(read_file(file + ".old") == "an earlier trace\n");

  // The kept part is binary: resuming it as text is refused, and the file is left alone.
  const std::string before = read_file(file);
  const RunResult wrong = run_process({spanring, "drain", "--segment", segment, "-o", file,
                                       "--format", "strace"});
  CHECK(wrong.exit_code == 2);
  CHECK(contains(wrong.err, "its committed part is binary"));
  CHECK(read_file(file) == before);

  // No --format: the kept part decides. SIGTERM: drain what is published, flush, exit 0.
  const RunResult drain = run_process(
      {"/bin/sh", "-c", "\"$0\" drain --segment \"$1\" -o \"$2\" & p=$!; sleep 0.5; "
                        "kill -TERM $p; wait $p",
       spanring, segment, file});
  INFO("drain: ", drain.describe());
  CHECK(drain.exit_code == 0);
  CHECK(contains(drain.err, "resuming"));
  CHECK(!contains(drain.err, "kept the existing"));
  CHECK(read_file(file + ".old") == "an earlier trace\n");
  CHECK(!std::filesystem::exists(file + ".old.old"));

  // Any other existing file `drain` is pointed at is kept as FILE.old, as `run` does.
  const std::string other = tmp.file("other.strace");
  write_file(other, "another trace\n");
  const RunResult drain_other = run_process(
      {"/bin/sh", "-c", "\"$0\" drain --segment \"$1\" -o \"$2\" & p=$!; sleep 0.3; "
                        "kill -TERM $p; wait $p",
       spanring, segment, other});
  spanring::Segment::remove(segment);
  INFO("drain into another file: ", drain_other.describe());
  CHECK(drain_other.exit_code == 0);
  CHECK(contains(drain_other.err, "kept the existing " + other + " as " + other + ".old"));
  CHECK(read_file(other + ".old") == "another trace\n");
  REQUIRE(drain.exit_code == 0);

  binary_test::TextRenderer r;
  const spanring::ReadResult res = binary_test::read_bytes(read_file(file), r);
  INFO(res.message);
  CHECK(res.status == spanring::ReadResult::Status::kComplete);
  CHECK(res.notes.empty());  // block numbers continue across the two drainers
  // Every record exactly once, one anchor per pid.
  const RunResult rep = run_process({spanring, "report", "--json", file});
  REQUIRE(rep.exit_code == 0);
  const json j = json::parse(rep.out);
  std::map<std::string, uint64_t> got;
  for (const json& row : j["names"]) got[row["name"]] = row["count"];
  CHECK(got == expected_counts(expect));
  CHECK(j["dropped"] == 0);
  std::map<std::string, int> anchors;
  size_t pos = 0;
  while ((pos = r.text.find("[CLOCK_ANCHOR] v=1 pid=", pos)) != std::string::npos) {
    pos += 23;
    anchors[r.text.substr(pos, r.text.find(' ', pos) - pos)]++;
  }
  CHECK(anchors.size() == j["processes"].get<size_t>());
  for (const auto& [pid, n] : anchors) CHECK_MESSAGE(n == 1, "pid ", pid, ": ", n, " anchors");
}

}  // TEST_SUITE("binary")

TEST_CASE("mutations of the demo's real binary trace (v4: clock events, TSC runs) never crash a reader") {
  // The synthetic traces of test_binary_fuzz stand for what a drainer writes; this takes the
  // drainer's own file: bytes flipped (with and without the checksums repaired, so that the
  // event and run walkers see the damage), random bytes written over a stretch, cuts. Every
  // outcome is a status, never a crash (run it under ASan and UBSan).
  const DemoRun& d = demo_run();
  const std::string base = read_file(d.binary);
  REQUIRE(base.size() > 4096);
  {
    const std::map<int, uint64_t> types = event_types(base);
    CHECK(types.count(9) == 1);  // the clock events are among what gets mutated
  }
  std::mt19937_64 rng(0x5eed23);
  uint64_t read_some = 0;
  for (int i = 0; i < 400; ++i) {
    std::string f = base;
    switch (i % 4) {
      case 0:  // a few bytes flipped
      case 1:
        for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k)
          f[rng() % f.size()] ^= static_cast<char>(1 + rng() % 255);
        break;
      case 2: {  // random bytes over a stretch
        const size_t at = rng() % f.size();
        const size_t n = std::min<size_t>(f.size() - at, 1 + rng() % 200);
        for (size_t k = 0; k < n; ++k) f[at + k] = static_cast<char>(rng());
        break;
      }
      default:  // cut, and a byte flipped before the cut
        f.resize(1 + rng() % f.size());
        f[rng() % f.size()] ^= 0x40;
    }
    if (i % 2 == 0) fix_crcs(f);
    CAPTURE(i);
    binary_test::TextRenderer r;
    read_bytes(f, r);
    read_some += r.events != 0;
  }
  CHECK(read_some > 0);
}
