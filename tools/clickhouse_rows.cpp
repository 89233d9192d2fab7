#include "tools/clickhouse_rows.h"

#include <cstring>

namespace spanring {

namespace {

// RowBinary: UInt* little-endian, String = LEB128 length + bytes, Array = LEB128 count +
// elements (https://clickhouse.com/docs/en/interfaces/formats#rowbinary).
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
template <class T>
void put_int(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian: binary_format.h static_asserts it
  out.append(b, sizeof(T));
}
void put_str(std::string& out, std::string_view s) {
  put_varint(out, s.size());
  out.append(s.data(), s.size());
}

// The columns of each table, in RowBinary order; the CREATE statements add their types.
struct Column {
  const char* name;
  const char* type;
};
const Column kKey[] = {{"host", "String"}, {"session", "String"}, {"pid", "UInt32"},
                       {"tid", "UInt32"}};
const std::vector<Column> kColumns[4] = {
    // processes: one row per pid (its first record's thread in tid).
    {{"mono_ns", "UInt64"}, {"wall_ns", "UInt64"}, {"cmdline", "Array(String)"}},
    // spans
    {{"thread", "String"}, {"seq", "UInt64"}, {"inv", "UInt64"}, {"hid", "UInt64"},
     {"depth", "UInt32"}, {"name", "String"}, {"ts", "UInt64"}, {"wall_ns", "UInt64"},
     {"dur", "UInt64"}, {"device", "UInt8"}, {"attr_keys", "Array(String)"},
     {"attr_values", "Array(String)"}},
    // drops
    {{"reason", "String"}, {"first_seq", "UInt64"}, {"last_seq", "UInt64"},
     {"dropped", "UInt64"}, {"n", "UInt32"}},
    // unfinished
    {{"inv", "UInt64"}, {"depth", "UInt32"}, {"ts", "UInt64"}, {"name", "String"},
     {"undescribed", "UInt64"}, {"n", "UInt32"}},
};
// The ReplacingMergeTree key after (host, session, pid, tid): what identifies one row's event.
const char* const kOrderBy[4] = {
    "host, session, pid",
    "host, session, pid, tid, seq",
    "host, session, pid, tid, reason, first_seq, n",
    "host, session, pid, tid, depth, ts, n",
};

}  // namespace

std::vector<std::string> clickhouse_schema(const std::string& database,
                                           const std::string& cluster) {
  std::vector<std::string> out;
  out.push_back("CREATE DATABASE IF NOT EXISTS " + database);
  for (int t = 0; t < 4; ++t) {
    std::string sql = "CREATE TABLE IF NOT EXISTS " + database + "." + kClickHouseTables[t] + " (";
    for (const Column& c : kKey) sql += std::string(c.name) + " " + c.type + ", ";
    for (const Column& c : kColumns[t]) sql += std::string(c.name) + " " + c.type + ", ";
    sql.resize(sql.size() - 2);
    // ReplacingMergeTree: rows with the same ORDER BY key are merged into one (in the
    // background, and always in a SELECT ... FINAL). No version column: copies of a row are
    // identical, any one may stay.
    sql += ") ENGINE = ReplacingMergeTree() ORDER BY (" + std::string(kOrderBy[t]) + ")";
    out.push_back(std::move(sql));
  }
  if (!cluster.empty()) {
    for (const char* t : kClickHouseTables) {
      out.push_back("CREATE TABLE IF NOT EXISTS " + database + "." + t + "_all AS " + database +
                    "." + t + " ENGINE = Distributed(" + cluster + ", " + database + ", " + t +
                    ", cityHash64(host, session))");
    }
  }
  return out;
}

std::string clickhouse_insert(const std::string& database, int table) {
  std::string sql = "INSERT INTO " + database + "." + kClickHouseTables[table] + " (";
  for (const Column& c : kKey) sql += std::string(c.name) + ", ";
  for (const Column& c : kColumns[table]) sql += std::string(c.name) + ", ";
  sql.resize(sql.size() - 2);
  sql += ") FORMAT RowBinary";
  return sql;
}

ClickHouseRows::ClickHouseRows(std::string host, std::string session)
    : host_(std::move(host)), session_(std::move(session)) {}

RowBatch ClickHouseRows::take() noexcept {
  RowBatch out = std::move(batch_);
  batch_ = RowBatch{};
  return out;
}

void ClickHouseRows::reset() noexcept {
  batch_ = RowBatch{};
  anchors_.clear();
  thread_names_.clear();
  text_seq_.clear();
  drop_n_.clear();
  unfinished_n_.clear();
}

void ClickHouseRows::key(std::string& out, uint32_t pid, uint32_t tid) {
  put_str(out, host_);
  put_str(out, session_);
  put_int<uint32_t>(out, pid);
  put_int<uint32_t>(out, tid);
}

void ClickHouseRows::process(const ProcessEvent& e) {
  anchors_[e.pid] = Anchor{e.mono_ns, e.wall_ns};
  if (quiet_) return;
  std::string& out = batch_.body[0];
  key(out, e.pid, e.tid);
  put_int<uint64_t>(out, e.mono_ns);
  put_int<uint64_t>(out, e.wall_ns);
  // NUL-separated arguments (a trailing NUL ends the last, it does not start another).
  std::vector<std::string_view> args;
  std::string_view rest = e.cmdline;
  while (!rest.empty()) {
    const size_t nul = rest.find('\0');
    args.push_back(rest.substr(0, nul));
    rest = nul == std::string_view::npos ? std::string_view{} : rest.substr(nul + 1);
  }
  put_varint(out, args.size());
  for (std::string_view a : args) put_str(out, a);
  ++batch_.rows[0];
}

void ClickHouseRows::thread(const ThreadEvent& e) {
  thread_names_[{e.pid, e.tid}] = std::string(e.name);
}

void ClickHouseRows::span(const SpanEvent& e) {
  uint64_t seq;
  if (e.record != nullptr) {
    seq = e.record->header.seq;
  } else {
    seq = text_seq_[{e.pid, e.tid}]++;
  }
  if (quiet_) return;
  const EventSpelling::Span s = spelling_.span(e);
  std::string& out = batch_.body[1];
  key(out, e.pid, e.tid);
  const auto name = thread_names_.find({e.pid, e.tid});
  put_str(out, name == thread_names_.end() ? std::string_view{} : std::string_view{name->second});
  put_int<uint64_t>(out, seq);
  put_int<uint64_t>(out, e.inv);
  put_int<uint64_t>(out, e.hid);
  put_int<uint32_t>(out, e.depth);
  put_str(out, s.name);
  put_int<uint64_t>(out, e.ts_ns);
  // Wall clock as the [STRACE] spec defines it: only for host spans at or after the anchor.
  uint64_t wall = 0;
  const auto a = anchors_.find(e.pid);
  if (!s.device && a != anchors_.end() && e.ts_ns >= a->second.mono_ns)
    wall = a->second.wall_ns + (e.ts_ns - a->second.mono_ns);
  put_int<uint64_t>(out, wall);
  put_int<uint64_t>(out, e.dur_ns);
  put_int<uint8_t>(out, s.device ? 1 : 0);
  // Attributes: encoded `k=v` tokens separated by single spaces; the key ends at the first `=`
  // (a token without one is a key with an empty value).
  std::vector<std::pair<std::string_view, std::string_view>> kv;
  std::string_view rest = s.attrs;
  while (!rest.empty()) {
    const size_t sp = rest.find(' ');
    const std::string_view tok = rest.substr(0, sp);
    rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
    if (tok.empty()) continue;
    const size_t eq = tok.find('=');
    kv.emplace_back(tok.substr(0, eq),
                    eq == std::string_view::npos ? std::string_view{} : tok.substr(eq + 1));
  }
  put_varint(out, kv.size());
  for (const auto& [k, v] : kv) put_str(out, k);
  put_varint(out, kv.size());
  for (const auto& [k, v] : kv) put_str(out, v);
  ++batch_.rows[1];
}

void ClickHouseRows::drops(const DropsEvent& e) {
  const uint32_t n =
      drop_n_[{e.pid, e.tid, static_cast<uint8_t>(e.reason), e.first_seq}]++;
  if (quiet_) return;
  std::string& out = batch_.body[2];
  key(out, e.pid, e.tid);
  put_str(out, drop_reason_name(e.reason));
  put_int<uint64_t>(out, e.first_seq);
  put_int<uint64_t>(out, e.last_seq);
  put_int<uint64_t>(out, e.dropped);
  put_int<uint32_t>(out, n);
  ++batch_.rows[2];
}

void ClickHouseRows::unfinished(const UnfinishedEvent& e) {
  const uint32_t n = unfinished_n_[{e.pid, e.tid, e.depth, e.ts_ns}]++;
  if (quiet_) return;
  std::string& out = batch_.body[3];
  key(out, e.pid, e.tid);
  put_int<uint64_t>(out, e.inv);
  put_int<uint32_t>(out, e.depth);
  put_int<uint64_t>(out, e.ts_ns);
  put_str(out, spelling_.unfinished_name(e));
  put_int<uint64_t>(out, 0);
  put_int<uint32_t>(out, n);
  ++batch_.rows[3];
}

void ClickHouseRows::undescribed(const UndescribedEvent& e) {
  // An undescribed row has no name or start: its depth is UINT32_MAX (never a described span's:
  // those are at most kOpenSpanMax deep), ts 0, the count in `undescribed`.
  const uint32_t n = unfinished_n_[{e.pid, e.tid, UINT32_MAX, 0}]++;
  if (quiet_) return;
  std::string& out = batch_.body[3];
  key(out, e.pid, e.tid);
  put_int<uint64_t>(out, 0);
  put_int<uint32_t>(out, UINT32_MAX);
  put_int<uint64_t>(out, 0);
  put_str(out, "");
  put_int<uint64_t>(out, e.count);
  put_int<uint32_t>(out, n);
  ++batch_.rows[3];
}

}  // namespace spanring
