// The strict [STRACE] text reader (format/text_reader.cpp) and `spanring report`'s numbers,
// checked against a trace written by hand and computed by hand; and the binary and text paths
// into the report and the Chrome writer agreeing event for event.
#include "binary_util.h"
#include "format/event_spelling.h"
#include "format/trace_reader.h"
#include "tools/report.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <tuple>
#include <vector>

using namespace spanring;
using namespace binary_test;
using nlohmann::json;

namespace {

// Durations (ns), by hand:
//   a.x   100 200 ... 1000 (10 spans): total 5500, mean 550, p50 = 5th smallest = 500
//         (nearest rank: ceil(0.50 * 10) = 5), p99 = 10th = 1000 (ceil(9.9) = 10), max 1000
//   c.dev 3000 1000 (clk=dev): total 4000, mean 2000, p50 = 1st = 1000 (ceil(1.0) = 1),
//         p99 = 2nd = 3000 (ceil(1.98) = 2), max 3000
//   b.y   7: total 7, mean 7, p50 = p99 = max = 7
// Per thread: 4200/4200 six a.x; 4200/4201 four a.x + b.y, 3 dropped (seq 4..6); 4300/4300
// two c.dev, 1 unfinished + 2 undescribed; pid 0: 5 dropped (no_ring). Records 13, dropped 8,
// unfinished 3 (not in the records), processes 2, threads 3.
const char* const kHandTrace =
    "[mono_ns=1000][T0x1068][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=4200 mono_ns=1000 wall_ns=1767225600000000000\n"
    "[mono_ns=1200][T0x1068][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4200 inv=1 hid=9f depth=0 name=a.x ts=1100 dur=100 k=1\n"
    "[mono_ns=1500][T0x1068][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4200 inv=1 hid=9f depth=0 name=a.x ts=1300 dur=200 k=1\n"
    "some other log line of the runtime, without a trace token\n"
    "[mono_ns=1900][T0x1068][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4200 inv=1 hid=9f depth=0 name=a.x ts=1600 dur=300 k=1\n"
    "[mono_ns=2400][T0x1068][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4200 inv=1 hid=9f depth=0 name=a.x ts=2000 dur=400 k=1\n"
    "[mono_ns=3000][T0x1068][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4200 inv=1 hid=9f depth=0 name=a.x ts=2500 dur=500 k=1\n"
    "[mono_ns=3700][T0x1068][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4200 inv=1 hid=9f depth=0 name=a.x ts=3100 dur=600 k=1\n"
    "[mono_ns=4500][T0x1069][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4201 inv=2 hid=0 depth=1 name=a.x ts=3800 dur=700 k=1\n"
    "[SPANRING_DROPS] v=1 pid=4200 tid=4201 dropped=3 first_seq=1 last_seq=3 reason=ring_full\n"
    "[mono_ns=5400][T0x1069][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4201 inv=2 hid=0 depth=1 name=a.x ts=4600 dur=800 k=1\n"
    "[STRACE] v=1 pid=4200 tid=4201 inv=2 hid=0 depth=1 name=a.x ts=5500 dur=900 k=1\n"
    "[mono_ns=7500][T0x1069][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4201 inv=2 hid=0 depth=1 name=a.x ts=6500 dur=1000 k=1\n"
    "[mono_ns=7607][T0x1069][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4201 inv=0 hid=0 depth=0 name=b.y ts=7600 dur=7 \n"
    "[mono_ns=800][T0x10cc][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=4300 mono_ns=800 wall_ns=1767225600000000100\n"
    "[mono_ns=23000][T0x10cc][TIMING] emit_host_span: [STRACE] v=1 pid=4300 tid=4300 inv=5 hid=0 depth=3 name=c.dev ts=20000 dur=3000 clk=dev\n"
    "[mono_ns=21001][T0x10cc][TIMING] emit_host_span: [STRACE] v=1 pid=4300 tid=4300 inv=5 hid=0 depth=3 name=c.dev ts=20001 dur=1000 clk=dev\n"
    "[SPANRING_DROPS] v=1 pid=0 tid=0 dropped=5 first_seq=0 last_seq=0 reason=no_ring\n"
    "[SPANRING_UNFINISHED] v=1 pid=4300 tid=4300 inv=7 depth=0 name=c.run ts=9000 reason=owner_died\n"
    "[SPANRING_UNFINISHED] v=1 pid=4300 tid=4300 undescribed=2 reason=owner_died_deeper_than_8\n";

json report_of(const std::string& bytes, int* rc = nullptr, std::string* err = nullptr) {
  TraceInput in = TraceInput::memory(bytes, "hand");
  std::string text;
  std::string e;
  int r;
  {
    TraceOutput out = TraceOutput::memory(&text);
    r = run_report(in, out, true, &e);
    out.finish();
  }
  if (rc) *rc = r;
  if (err) *err = e;
  return text.empty() ? json() : json::parse(text);
}

const json& name_row(const json& report, const std::string& name) {
  for (const json& r : report["names"])
    if (r["name"] == name) return r;
  FAIL("no row for ", name);
  static json none;
  return none;
}

const json& thread_row(const json& report, uint32_t pid, uint32_t tid) {
  for (const json& p : report["by_process"])
    if (p["pid"] == pid)
      for (const json& t : p["threads"])
        if (t["tid"] == tid) return t;
  FAIL("no row for ", pid, "/", tid);
  static json none;
  return none;
}

// Every event a reader delivers, as comparable tuples.
struct Collector final : EventVisitor {
  std::vector<std::string> events;
  EventSpelling spelling;
  void process(const ProcessEvent& e) override {
    events.push_back("process " + std::to_string(e.pid) + " " + std::to_string(e.mono_ns) + " " +
                     std::to_string(e.wall_ns));
  }
  void span(const SpanEvent& e) override {
    const EventSpelling::Span s = spelling.span(e);
    events.push_back("span " + std::to_string(e.pid) + " " + std::to_string(e.tid) + " " +
                     std::to_string(e.ts_ns) + " " + std::to_string(e.dur_ns) + " " +
                     std::to_string(e.inv) + " " + std::to_string(e.hid) + " " +
                     std::to_string(e.depth) + " [" + std::string(s.name) + "] [" +
                     std::string(s.attrs) + "] " + (s.device ? "dev" : "host"));
  }
  void drops(const DropsEvent& e) override {
    events.push_back("drops " + std::to_string(e.pid) + " " + std::to_string(e.tid) + " " +
                     std::to_string(e.dropped) + " " + std::to_string(e.first_seq) + " " +
                     std::to_string(e.last_seq) + " " + drop_reason_name(e.reason));
  }
  void unfinished(const UnfinishedEvent& e) override {
    events.push_back("unfinished " + std::to_string(e.pid) + " " + std::to_string(e.tid) + " " +
                     std::to_string(e.inv) + " " + std::to_string(e.depth) + " [" +
                     std::string(spelling.unfinished_name(e)) + "] " + std::to_string(e.ts_ns));
  }
  void undescribed(const UndescribedEvent& e) override {
    events.push_back("undescribed " + std::to_string(e.pid) + " " + std::to_string(e.tid) + " " +
                     std::to_string(e.count));
  }
};

const std::string kGoodLine =
    "[STRACE] v=1 pid=1 tid=1 inv=0 hid=0 depth=0 name=ok ts=1 dur=1 \n";

ReadResult read_text(const std::string& text, EventVisitor& v) {
  TraceInput in = TraceInput::memory(text, "text");
  return read_trace(in, v);
}

}  // namespace

TEST_SUITE("binary") {

TEST_CASE("report numbers of a hand-written [STRACE] trace equal the hand-computed ones") {
  int rc = -1;
  std::string err;
  const json r = report_of(kHandTrace, &rc, &err);
  INFO(err);
  REQUIRE(rc == 0);
  CHECK(r["status"] == "complete");
  CHECK(r["format"] == "[STRACE] text");
  CHECK(r["records"] == 13);
  CHECK(r["dropped"] == 8);
  CHECK(r["unfinished"] == 3);
  CHECK(r["processes"] == 2);
  CHECK(r["threads"] == 3);

  REQUIRE(r["names"].size() == 3);
  // Sorted by total time, largest first.
  CHECK(r["names"][0]["name"] == "a.x");
  CHECK(r["names"][1]["name"] == "c.dev");
  CHECK(r["names"][2]["name"] == "b.y");
  const json& ax = name_row(r, "a.x");
  CHECK(ax["count"] == 10);
  CHECK(ax["total_ns"] == 5500);
  CHECK(ax["mean_ns"].get<double>() == doctest::Approx(550.0));
  CHECK(ax["p50_ns"] == 500);
  CHECK(ax["p99_ns"] == 1000);
  CHECK(ax["max_ns"] == 1000);
  CHECK(ax["device_clock"] == false);
  const json& dev = name_row(r, "c.dev");
  CHECK(dev["count"] == 2);
  CHECK(dev["total_ns"] == 4000);
  CHECK(dev["mean_ns"].get<double>() == doctest::Approx(2000.0));
  CHECK(dev["p50_ns"] == 1000);
  CHECK(dev["p99_ns"] == 3000);
  CHECK(dev["max_ns"] == 3000);
  CHECK(dev["device_clock"] == true);
  const json& by = name_row(r, "b.y");
  CHECK(by["count"] == 1);
  CHECK(by["total_ns"] == 7);
  CHECK(by["p50_ns"] == 7);
  CHECK(by["p99_ns"] == 7);
  CHECK(by["max_ns"] == 7);

  CHECK(thread_row(r, 4200, 4200)["records"] == 6);
  CHECK(thread_row(r, 4200, 4200)["dropped"] == 0);
  CHECK(thread_row(r, 4200, 4201)["records"] == 5);
  CHECK(thread_row(r, 4200, 4201)["dropped"] == 3);
  CHECK(thread_row(r, 4300, 4300)["records"] == 2);
  CHECK(thread_row(r, 4300, 4300)["unfinished"] == 3);
  CHECK(thread_row(r, 0, 0)["dropped"] == 5);

  REQUIRE(r["drops"].size() == 2);
  CHECK(r["drops"][0] == json{{"pid", 4200}, {"tid", 4201}, {"dropped", 3}, {"first_seq", 1},
                              {"last_seq", 3}, {"reason", "ring_full"}});
  CHECK(r["drops"][1]["reason"] == "no_ring");
  REQUIRE(r["unfinished_spans"].size() == 2);
  CHECK(r["unfinished_spans"][0]["name"] == "c.run");
  CHECK(r["unfinished_spans"][0]["ts_ns"] == 9000);
  CHECK(r["unfinished_spans"][1]["undescribed"] == 2);
  // The runtime's other line is skipped and said so.
  REQUIRE(r["notes"].size() == 1);
  CHECK(r["notes"][0].get<std::string>().find("1 line(s) hold no trace token") !=
        std::string::npos);

  // The text report says the same, with drops and unfinished spans listed under the tables.
  TraceInput in = TraceInput::memory(kHandTrace, "hand");
  std::string text;
  {
    TraceOutput out = TraceOutput::memory(&text);
    std::string e;
    REQUIRE(run_report(in, out, false, &e) == 0);
    out.finish();
  }
  CHECK(text.find("processes: 2  threads: 3  records: 13  lost: 8 dropped, 3 unfinished\n") !=
        std::string::npos);
  CHECK(text.find("pid 4200 tid 4201 (a.*, b.*): 3 record(s) in 1 range(s), seq 1..3, reason "
                  "ring_full (the ring was full)\n") != std::string::npos);
  CHECK(text.find("outside any thread: 5 record(s), reason no_ring") != std::string::npos);
  CHECK(text.find("pid 4300 tid 4300: c.run (depth 0, inv 7), started at ts=9000") !=
        std::string::npos);
  CHECK(text.find("2 span(s) nested deeper than 8") != std::string::npos);
  // One unit per table: host spans in us, the clk=dev ones in their own table in device ns.
  CHECK(text.rfind("spanring report: hand ([STRACE] text, ", 0) == 0);
  CHECK(text.find("\nclock: host spans CLOCK_MONOTONIC ns, tables in us; clk=dev spans "
                  "device-clock ns, in a table of their own\n") != std::string::npos);
  CHECK(text.find("\nhost spans (CLOCK_MONOTONIC; us)\nspan name     count        total us") !=
        std::string::npos);
  CHECK(text.find("\na.x              10           5.500         0.550") != std::string::npos);
  CHECK(text.find("\ndevice-clock spans (clk=dev; device-clock ns, not comparable with host "
                  "time)\nspan name     count        total ns") != std::string::npos);
  CHECK(text.find("\nc.dev             2            4000          2000") != std::string::npos);
  // [STRACE] text has no thread names or command lines: what it holds (the span families).
  CHECK(text.find("(no command line in [STRACE] text) spans: a.*, b.*\n") != std::string::npos);
}

TEST_CASE("the report's tables keep every cell apart when numbers outgrow their columns") {
  // A 30-hour span: 1.08e14 ns is 108000000000.000 us, 16 characters, wider than the 14 of the
  // mean, p50, p99 and max columns.
  const std::string t =
      "[STRACE] v=1 pid=4194304 tid=4194305 inv=0 hid=0 depth=0 name=long.span ts=100 "
      "dur=108000000000000 \n"
      "[STRACE] v=1 pid=4194304 tid=4194305 inv=0 hid=0 depth=0 name=short ts=200 dur=5 \n";
  TraceInput in = TraceInput::memory(t, "wide");
  std::string text;
  {
    TraceOutput out = TraceOutput::memory(&text);
    std::string e;
    REQUIRE(run_report(in, out, false, &e) == 0);
    out.finish();
  }
  INFO(text);
  auto fields = [](const std::string& line) {
    std::vector<std::string> f;
    size_t i = 0;
    while ((i = line.find_first_not_of(' ', i)) != std::string::npos) {
      const size_t e = line.find(' ', i);
      f.push_back(line.substr(i, e == std::string::npos ? std::string::npos : e - i));
      i = e;
    }
    return f;
  };
  auto line_starting = [&](const std::string& prefix) {
    const size_t at = text.find("\n" + prefix);
    REQUIRE(at != std::string::npos);
    return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  const std::string us = "108000000000.000";
  CHECK(fields(line_starting("long.span")) ==
        std::vector<std::string>{"long.span", "1", us, us, us, us, us});
  CHECK(fields(line_starting("short")) ==
        std::vector<std::string>{"short", "1", "0.005", "0.005", "0.005", "0.005", "0.005"});
  // The columns still line up: each number ends where its header does.
  const std::string header = line_starting("span name");
  const std::string row = line_starting("long.span");
  CHECK(header.size() == row.size());
}

TEST_CASE("the report shows names decoded, keeps the [STRACE] spelling in --json, and labels lanes by role") {
  const std::string pre = "[STRACE] v=1 pid=7 tid=8 inv=0 hid=0 depth=0 ";
  const std::string t = pre + "name=ext.app.odd%20name%3Dx ts=100 dur=5 why=%5Bdemo%5D\n" +
                        pre + "name=node.dispatch ts=200 dur=5 run_id=0 task_slot=1 "
                              "role=scheduler\n" +
                        pre + "name=bad.line%0A ts=300 dur=5 \n";
  TraceInput in = TraceInput::memory(t, "names");
  std::string text;
  {
    TraceOutput out = TraceOutput::memory(&text);
    std::string e;
    REQUIRE(run_report(in, out, false, &e) == 0);
    out.finish();
  }
  CHECK(text.find("\next.app.odd name=x ") != std::string::npos);
  CHECK(text.find("%20") == std::string::npos);
  CHECK(text.find("\nbad.line\\x0a ") != std::string::npos);  // a control byte stays visible
  CHECK(text.find("  scheduler  ") != std::string::npos);  // the lane its role names
  int rc = -1;
  const json r = report_of(t, &rc);
  REQUIRE(rc == 0);
  const json& row = name_row(r, "ext.app.odd%20name%3Dx");
  CHECK(row["decoded_name"] == "ext.app.odd name=x");
  CHECK(r["by_process"][0]["threads"][0]["role"] == "scheduler");
  CHECK(r["by_process"][0]["families"] == json{"bad.*", "ext.*", "node.*"});
}

TEST_CASE("the same trace written as binary gives the same report") {
  TraceBuilder b;
  b.begin_block();
  b.process(4200, 4200, 1000, 1767225600000000000ull, "");
  for (int i = 1; i <= 6; ++i)
    b.span(4200, 4200, make_record(i - 1, 0, 100u * i, 1, 0x9f, 0, "a.x", "k=1"));
  b.span(4200, 4201, make_record(0, 3800, 700, 2, 0, 1, "a.x", "k=1"));
  b.drops(4200, 4201, 3, 1, 3, DropReason::kRingFull);
  b.end_block();
  b.begin_block();
  for (int i = 8; i <= 10; ++i)
    b.span(4200, 4201, make_record(i - 4, 0, 100u * i, 2, 0, 1, "a.x", "k=1"));
  b.span(4200, 4201, make_record(7, 7600, 7, 0, 0, 0, "b.y", ""));
  b.process(4300, 4300, 800, 1767225600000000100ull, "");
  b.span(4300, 4300, make_record(0, 20000, 3000, 5, 0, 3, "c.dev", "clk=dev"));
  b.span(4300, 4300, make_record(1, 20001, 1000, 5, 0, 3, "c.dev", "clk=dev"));
  b.drops(0, 0, 5, 0, 0, DropReason::kNoRing);
  b.unfinished(4300, 4300, 7, 0, "c.run", false, 9000);
  b.undescribed(4300, 4300, 2);
  b.end_block();

  json from_binary = report_of(b.bytes);
  json from_text = report_of(kHandTrace);
  // window: the binary's spans start at other ts than the text's (only durations match).
  for (const char* k : {"source", "format", "bytes", "notes", "window"}) {
    from_binary.erase(k);
    from_text.erase(k);
  }
  CHECK(from_binary.dump(1) == from_text.dump(1));
}

TEST_CASE("spanring's own text and its binary of the same events read as the same events") {
  // Escaped and cut names and attributes, device spans, every drop reason, unfinished spans.
  const TraceBuilder b = synthetic_trace(8);
  Collector from_binary, from_text;
  const ReadResult rb = read_text(b.bytes, from_binary);  // read_trace tells the formats apart
  const ReadResult rt = read_text(b.text, from_text);
  INFO(rt.message);
  CHECK(rb.status == ReadResult::Status::kComplete);
  CHECK(rt.status == ReadResult::Status::kComplete);
  CHECK(rt.format == "[STRACE] text");
  REQUIRE(from_binary.events.size() == from_text.events.size());
  for (size_t i = 0; i < from_text.events.size(); ++i) {
    CAPTURE(i);
    CHECK(from_binary.events[i] == from_text.events[i]);
  }
}

TEST_CASE("malformed trace lines are refused with the line, its byte offset and the reason") {
  const std::string good = kGoodLine;
  const std::string pre = "[mono_ns=2][T0x1][TIMING] emit_host_span: [STRACE] v=1 ";
  struct Bad {
    std::string line;
    std::string why;
  };
  const std::vector<Bad> bad = {
      {pre + "pid=-1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 \n", "pid has a sign"},
      {pre + "pid=1 tid=1 inv=0 hid=0x9f depth=0 name=a ts=1 dur=1 \n", "hid has a 0x prefix"},
      {pre + "pid=1 tid=1 inv=0 hid=9F depth=0 name=a ts=1 dur=1 \n", "expected lowercase hex"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name= ts=1 dur=1 \n", "empty name"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=" + std::string(65, 'n') + " ts=1 dur=1 \n",
       "name of 65 bytes (at most 64"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1\n", "expected \" \""},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 x=%4\n",
       "not followed by two uppercase hex digits"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 x=%0a\n",
       "not followed by two uppercase hex digits"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a=b ts=1 dur=1 \n",
       "byte 0x3d is not allowed unescaped in name"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 x=[1]\n",
       "byte 0x5b is not allowed unescaped in attributes"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 x=1\r\n",
       "byte 0x0d is not allowed unescaped in attributes"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 " + std::string(193, 'a') + "\n",
       "attributes of 193 bytes"},
      {pre + "pid=99999999999 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 \n",
       "pid 99999999999 is larger than 4294967295"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=18446744073709551616 dur=1 \n",
       "ts does not fit 64 bits"},
      {pre + "pid=1 tid=1 inv=0 hid=0 depth=0 name=a dur=1 ts=1 \n", "expected \" ts=\""},
      {"[STRACE] v=2 pid=1 tid=1 inv=0 hid=0 depth=0 name=a ts=1 dur=1 \n", "expected \" v=1 pid=\""},
      {"[CLOCK_ANCHOR] v=1 pid=1 mono_ns=1 wall_ns=1\n", "expected \"[mono_ns=\""},
      {"[mono_ns=1][T0x1][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=1 mono_ns=1 wall_ns=1 x\n",
       "unexpected bytes after wall_ns"},
      {"[SPANRING_DROPS] v=1 pid=1 tid=1 dropped=1 first_seq=0 last_seq=0 reason=bogus\n",
       "unknown drop reason"},
      {"[SPANRING_DROPS] v=1 pid=1 tid=1 dropped=1 first_seq=5 last_seq=4 reason=ring_full\n",
       "last_seq 4 < first_seq"},
      {"[SPANRING_UNFINISHED] v=1 pid=1 tid=1 inv=0 depth=0 name=x ts=1 reason=other\n",
       "expected \" reason=owner_died\""},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.line);
    Collector c;
    const ReadResult r = read_text(good + b.line + good, c);
    CHECK(r.status == ReadResult::Status::kCorrupt);
    CHECK(r.message.find("line 2 (byte " + std::to_string(good.size()) + "): ") == 0);
    CHECK_MESSAGE(r.message.find(b.why) != std::string::npos, r.message);
    CHECK(r.error_offset == good.size());
    CHECK(c.events.size() == 1);  // the line before was delivered, nothing after
  }
}

TEST_CASE("an empty input is refused (exit 1, nothing written); a trace with no span says so; a file that is not a trace says why") {
  int rc = -1;
  std::string err;
  json r = report_of("", &rc, &err);
  CHECK(rc == 1);
  CHECK(r.is_null());
  CHECK(err == "hand is not a trace: it is empty (0 bytes)");

  TraceInput in = TraceInput::memory("", "empty");
  std::string text;
  {
    TraceOutput out = TraceOutput::memory(&text);
    std::string e;
    CHECK(run_report(in, out, false, &e) == 1);
    out.finish();
  }
  CHECK(text.empty());

  // Only anchors: a trace, with no records.
  r = report_of("[mono_ns=1][T0x1][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=1 mono_ns=1 "
                "wall_ns=1\n", &rc, &err);
  CHECK(rc == 0);
  CHECK(r["records"] == 0);
  CHECK(r["processes"] == 1);

  r = report_of("hello\nworld\n", &rc, &err);
  CHECK(rc == 1);
  CHECK(r.is_null());
  CHECK(err.find("hand is not a trace: read 12 bytes (2 complete lines): no line holds "
                 "[STRACE]") == 0);
  CHECK(err.find("it starts with \"hello\\x0aworld\\x0a\"") != std::string::npos);

  r = report_of(std::string("\x7f" "ELF\x02\x01\x01\0\0\0\0\0", 12) + std::string(3000, '\0'),
                &rc, &err);
  CHECK(rc == 1);
  CHECK(err.find("NUL bytes (binary data)") != std::string::npos);
}

TEST_CASE("a text trace cut inside its last line reads every whole line and says so") {
  const std::string t = std::string(kHandTrace);
  const std::string cut = t.substr(0, t.size() - 10);
  int rc = -1;
  std::string err;
  const json r = report_of(cut, &rc, &err);
  CHECK(rc == 0);
  CHECK(r["status"] == "cut");
  CHECK(err.find("the file is cut at byte " + std::to_string(cut.size()) + ", inside line 20") !=
        std::string::npos);
  CHECK(r["unfinished"] == 1);  // the undescribed line was cut off
}

}  // TEST_SUITE("binary")

TEST_CASE("a snapshot's overwritten range reads from [STRACE] text as drop reason overwritten") {
  Collector c;
  const ReadResult r = read_text(
      "[SPANRING_DROPS] v=1 pid=5 tid=6 dropped=100 first_seq=0 last_seq=99 reason=overwritten\n" +
          kGoodLine,
      c);
  INFO(r.message);
  CHECK(r.status == ReadResult::Status::kComplete);
  REQUIRE(c.events.size() == 2);
  CHECK(c.events[0] == "drops 5 6 100 0 99 overwritten");
}
