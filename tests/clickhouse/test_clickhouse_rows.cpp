// ClickHouseRows (tools/clickhouse_rows.h) without a server: the RowBinary rows of every event
// kind, decoded back field by field; the same events from a binary trace and from [STRACE] text;
// the ordinals that key events with no sequence number; a quiet replay continuing them; the
// schema's and the inserts' column lists agreeing; derive_session (tools/export.h).
#include "tests/binary/binary_util.h"
#include "mp_util.h"

#include "format/binary_reader.h"
#include "format/text_reader.h"
#include "tools/clickhouse_rows.h"
#include "tools/export.h"

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using binary_test::TraceBuilder;
using binary_test::make_record;
using spanring::ClickHouseRows;
using spanring::DropReason;
using spanring::RowBatch;

namespace {

// Reads RowBinary back (the test's own decoder of the format's rules).
struct RowReader {
  std::string_view in;
  size_t at = 0;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      REQUIRE(at < in.size());
      const auto b = static_cast<unsigned char>(in[at++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
  }
  template <class T>
  T num() {
    REQUIRE(at + sizeof(T) <= in.size());
    T v;
    std::memcpy(&v, in.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const uint64_t n = varint();
    REQUIRE(at + n <= in.size());
    std::string s(in.substr(at, n));
    at += n;
    return s;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(varint());
    for (auto& s : v) s = str();
    return v;
  }
  bool done() const { return at == in.size(); }
};

struct SpanRow {
  std::string host, session;
  uint32_t pid, tid;
  std::string thread;
  uint64_t seq, inv, hid;
  uint32_t depth;
  std::string name;
  uint64_t ts, wall, dur;
  uint8_t device;
  std::vector<std::string> keys, values;
};
std::vector<SpanRow> span_rows(const RowBatch& b) {
  std::vector<SpanRow> out;
  RowReader r{b.body[1]};
  while (!r.done()) {
    SpanRow s;
    s.host = r.str();
    s.session = r.str();
    s.pid = r.num<uint32_t>();
    s.tid = r.num<uint32_t>();
    s.thread = r.str();
    s.seq = r.num<uint64_t>();
    s.inv = r.num<uint64_t>();
    s.hid = r.num<uint64_t>();
    s.depth = r.num<uint32_t>();
    s.name = r.str();
    s.ts = r.num<uint64_t>();
    s.wall = r.num<uint64_t>();
    s.dur = r.num<uint64_t>();
    s.device = r.num<uint8_t>();
    s.keys = r.strs();
    s.values = r.strs();
    out.push_back(std::move(s));
  }
  CHECK(out.size() == b.rows[1]);
  return out;
}

struct DropRow {
  uint32_t pid, tid;
  std::string reason;
  uint64_t first, last, dropped;
  uint32_t n;
};
std::vector<DropRow> drop_rows(const RowBatch& b) {
  std::vector<DropRow> out;
  RowReader r{b.body[2]};
  while (!r.done()) {
    r.str();
    r.str();
    DropRow d;
    d.pid = r.num<uint32_t>();
    d.tid = r.num<uint32_t>();
    d.reason = r.str();
    d.first = r.num<uint64_t>();
    d.last = r.num<uint64_t>();
    d.dropped = r.num<uint64_t>();
    d.n = r.num<uint32_t>();
    out.push_back(d);
  }
  CHECK(out.size() == b.rows[2]);
  return out;
}

// One process (anchor mono 1000 ns, wall 5e18), a named thread, three spans (one before the
// anchor, one with attributes, one device span), two no_ring drops, a ring_full drop, an
// unfinished span and an undescribed count.
TraceBuilder sample_trace() {
  TraceBuilder t;
  t.begin_block();
  t.process(7, 7, 1000, 5000000000000000000ull, std::string("prog\0--x\0", 9));
  t.thread(7, 8, "worker");
  t.span(7, 8, make_record(0, 500, 10, 0, 0, 0, "early", ""));
  t.span(7, 8, make_record(1, 2000, 20, 3, 0x9f, 1, "chip.run", "run_id=1 role=a=b"));
  t.span(7, 8, make_record(2, 30, 40, 3, 0x9f, 2, "chip.dev", "clk=dev"));
  t.drops(0, 0, 5, 0, 0, DropReason::kNoRing);
  t.end_block();
  t.begin_block();
  t.drops(0, 0, 2, 0, 0, DropReason::kNoRing);
  t.drops(7, 8, 4, 3, 6, DropReason::kRingFull);
  t.span(7, 8, make_record(7, 3000, 50, 0, 0, 0, "after", ""));
  t.unfinished(7, 8, 3, 1, "open.span", false, 2500);
  t.undescribed(7, 8, 4);
  t.end_block();
  return t;
}

RowBatch rows_of_binary(const std::string& bytes, ClickHouseRows& rows) {
  spanring::TraceInput in = spanring::TraceInput::memory(bytes);
  REQUIRE(spanring::read_binary_trace(in, rows).status == spanring::ReadResult::Status::kComplete);
  return rows.take();
}

}  // namespace

TEST_CASE("spans, drops, unfinished and processes become RowBinary rows with their keys") {
  const TraceBuilder t = sample_trace();
  ClickHouseRows rows("h1", "s1");
  const RowBatch b = rows_of_binary(t.bytes, rows);
  CHECK(b.rows[0] == 1);
  CHECK(b.rows[1] == 4);
  CHECK(b.rows[2] == 3);
  CHECK(b.rows[3] == 2);

  const std::vector<SpanRow> spans = span_rows(b);
  REQUIRE(spans.size() == 4);
  for (const SpanRow& s : spans) {
    CHECK(s.host == "h1");
    CHECK(s.session == "s1");
    CHECK(s.pid == 7);
    CHECK(s.tid == 8);
    CHECK(s.thread == "worker");
  }
  // Before the anchor: no wall clock; after it: anchor wall + (ts - anchor mono).
  CHECK(spans[0].name == "early");
  CHECK(spans[0].wall == 0);
  CHECK(spans[1].seq == 1);
  CHECK(spans[1].inv == 3);
  CHECK(spans[1].hid == 0x9f);
  CHECK(spans[1].depth == 1);
  CHECK(spans[1].ts == 2000);
  CHECK(spans[1].dur == 20);
  CHECK(spans[1].wall == 5000000000000000000ull + 1000);
  CHECK(spans[1].device == 0);
  // A value holding `=` keeps it: the key ends at the first one.
  CHECK(spans[1].keys == std::vector<std::string>{"run_id", "role"});
  CHECK(spans[1].values == std::vector<std::string>{"1", "a=b"});
  CHECK(spans[2].device == 1);
  CHECK(spans[2].wall == 0);
  CHECK(spans[3].seq == 7);

  // Two no_ring drops share pid, tid, reason and first_seq: n tells them apart.
  const std::vector<DropRow> drops = drop_rows(b);
  REQUIRE(drops.size() == 3);
  CHECK((drops[0].reason == "no_ring" && drops[0].dropped == 5 && drops[0].n == 0));
  CHECK((drops[1].reason == "no_ring" && drops[1].dropped == 2 && drops[1].n == 1));
  CHECK((drops[2].reason == "ring_full" && drops[2].first == 3 && drops[2].last == 6 &&
         drops[2].dropped == 4 && drops[2].n == 0));

  // processes: the command line as an array of arguments.
  RowReader p{b.body[0]};
  CHECK(p.str() == "h1");
  CHECK(p.str() == "s1");
  CHECK(p.num<uint32_t>() == 7);
  CHECK(p.num<uint32_t>() == 7);
  CHECK(p.num<uint64_t>() == 1000);
  CHECK(p.num<uint64_t>() == 5000000000000000000ull);
  CHECK(p.strs() == std::vector<std::string>{"prog", "--x"});
  CHECK(p.done());

  // unfinished: a described span, then the undescribed count (depth UINT32_MAX).
  RowReader u{b.body[3]};
  u.str(), u.str(), u.num<uint32_t>(), u.num<uint32_t>();
  CHECK(u.num<uint64_t>() == 3);
  CHECK(u.num<uint32_t>() == 1);
  CHECK(u.num<uint64_t>() == 2500);
  CHECK(u.str() == "open.span");
  CHECK(u.num<uint64_t>() == 0);
  CHECK(u.num<uint32_t>() == 0);
  u.str(), u.str(), u.num<uint32_t>(), u.num<uint32_t>();
  CHECK(u.num<uint64_t>() == 0);
  CHECK(u.num<uint32_t>() == UINT32_MAX);
  CHECK(u.num<uint64_t>() == 0);
  CHECK(u.str().empty());
  CHECK(u.num<uint64_t>() == 4);
  CHECK(u.num<uint32_t>() == 0);
  CHECK(u.done());
}

TEST_CASE("the same events from [STRACE] text give the same spans, keyed by file order") {
  const TraceBuilder t = sample_trace();
  ClickHouseRows from_binary("h", "s"), from_text("h", "s");
  const std::vector<SpanRow> b = span_rows(rows_of_binary(t.bytes, from_binary));
  spanring::TraceInput in = spanring::TraceInput::memory(t.text);
  REQUIRE(spanring::read_strace_text(in, from_text).ok());
  const std::vector<SpanRow> x = span_rows(from_text.take());
  REQUIRE(x.size() == b.size());
  for (size_t i = 0; i < x.size(); ++i) {
    CAPTURE(i);
    CHECK(x[i].name == b[i].name);
    CHECK(x[i].keys == b[i].keys);
    CHECK(x[i].values == b[i].values);
    CHECK(x[i].ts == b[i].ts);
    CHECK(x[i].wall == b[i].wall);
    CHECK(x[i].device == b[i].device);
    CHECK(x[i].thread.empty());  // text has no thread names
    CHECK(x[i].seq == i);        // nor sequence numbers: the ordinal of the thread's spans
  }
}

TEST_CASE("a quiet replay of a prefix continues the ordinals and anchors of a full read") {
  const TraceBuilder t = sample_trace();
  ClickHouseRows full("h", "s");
  const RowBatch all = rows_of_binary(t.bytes, full);
  // The first block quietly, then the second: the second's rows equal the full read's.
  // block_ends: the file header's end, then each block's.
  const std::vector<uint64_t> ends = binary_test::block_ends(t.bytes);
  REQUIRE(ends.size() == 3);
  ClickHouseRows resumed("h", "s");
  spanring::TraceInput first = spanring::TraceInput::memory(t.bytes);
  first.set_limit(ends[1]);
  resumed.set_quiet(true);
  spanring::read_binary_trace(first, resumed);
  resumed.set_quiet(false);
  CHECK(resumed.pending().empty());
  // The second block alone behind the file header, as the follower reads it.
  const std::string second = t.bytes.substr(0, ends[0]) + t.bytes.substr(ends[1]);
  const RowBatch rest = rows_of_binary(second, resumed);
  const std::vector<DropRow> d_all = drop_rows(all), d_rest = drop_rows(rest);
  REQUIRE(d_rest.size() == 2);
  CHECK(d_rest[0].n == d_all[1].n);  // the second no_ring drop is still n = 1
  const std::vector<SpanRow> s_all = span_rows(all), s_rest = span_rows(rest);
  REQUIRE(s_rest.size() == 1);
  CHECK(s_rest[0].wall == s_all[3].wall);  // the anchor came from the replayed block
  CHECK(s_rest[0].thread == "worker");
}

TEST_CASE("every table's INSERT names the columns of its CREATE, in order") {
  const std::vector<std::string> schema = spanring::clickhouse_schema("db", "cl");
  REQUIRE(schema.size() == 1 + 4 + 4);
  CHECK(schema[0] == "CREATE DATABASE IF NOT EXISTS db");
  for (int t = 0; t < 4; ++t) {
    CAPTURE(t);
    const std::string& create = schema[1 + t];
    CHECK(create.find("ENGINE = ReplacingMergeTree()") != std::string::npos);
    // The CREATE's column names in order: the first word of each "name Type, " item.
    std::string names;
    const size_t open = create.find('(');
    const size_t close = create.find(") ENGINE");
    std::string_view cols(create.data() + open + 1, close - open - 1);
    while (!cols.empty()) {
      const size_t comma = cols.find(", ");
      const std::string_view item = cols.substr(0, comma);
      names += std::string(item.substr(0, item.find(' '))) + ", ";
      cols = comma == std::string_view::npos ? std::string_view{} : cols.substr(comma + 2);
    }
    names.resize(names.size() - 2);
    const std::string insert = spanring::clickhouse_insert("db", t);
    CHECK(insert == "INSERT INTO db." + std::string(spanring::kClickHouseTables[t]) + " (" +
                        names + ") FORMAT RowBinary");
    const std::string distributed =
        std::string("Distributed(cl, db, ") + spanring::kClickHouseTables[t];
    CHECK(schema[5 + t].find(distributed) != std::string::npos);
  }
}

TEST_CASE("a file's session is a hash of its first bytes, the same for the same file") {
  spanring_test::TempDir tmp;
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(tmp.file(name), std::ios::binary) << bytes;
    return tmp.file(name);
  };
  const TraceBuilder t = sample_trace();
  const std::string a = write("a.sptrace", t.bytes);
  const std::string a2 = write("a2.sptrace", t.bytes);
  const std::string s = spanring::derive_session(a);
  CHECK(s.size() == 16);
  CHECK(spanring::derive_session(a2) == s);
  // A file growing past its first block keeps its session (--follow derives it early).
  const std::vector<uint64_t> ends = binary_test::block_ends(t.bytes);
  CHECK(spanring::derive_session(write("first.sptrace", t.bytes.substr(0, ends[1]))) == s);
  // Another trace, another session; no complete first block header yet, none.
  TraceBuilder other;
  other.begin_block();
  other.span(1, 1, make_record(0, 1, 1, 0, 0, 0, "x", ""));
  other.end_block();
  CHECK(spanring::derive_session(write("b.sptrace", other.bytes)) != s);
  CHECK(spanring::derive_session(write("c.sptrace", t.bytes.substr(0, 40))).empty());
  // Text: its first bytes too.
  CHECK(spanring::derive_session(write("a.strace", t.text)) ==
        spanring::derive_session(write("a2.strace", t.text)));
  CHECK(spanring::derive_session(write("a.strace", t.text)) != s);
}
