// The events of a trace (format/event.h) as rows of spanring's ClickHouse tables, in
// ClickHouse's RowBinary format, and the schema of those tables (docs/clickhouse.md).
//
// Why RowBinary rather than JSONEachRow (both exist in ClickHouse 18.16 and today): a row is
// written with no text formatting and no escaping (strings are a length and the bytes, integers
// little-endian), so u64 values (hid, seq, ns timestamps) go in exactly, with no JSON number
// precision question, and the server parses ~2x faster. Its one cost is that a row must match
// the column list exactly, which the INSERT statements below name explicitly.
//
// Every row carries the key of what it describes within (host, session): a span its ring's
// owner (pid, tid) and the record's ring sequence number; tables are ReplacingMergeTree on that
// key, so a row sent twice (a retried batch, a restarted export) is one row in a `FINAL` query.
//
// One thread; the rows are appended to an in-memory batch that the caller takes and sends.
#pragma once

#include "format/event_spelling.h"
#include "format/event_visitor.h"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace spanring {

// The statements that create spanring's tables in `database` (docs/clickhouse.md), each
// idempotent (IF NOT EXISTS). With `cluster` non-empty, also `<table>_all` Distributed tables
// over that cluster (its name in the servers' remote_servers), sharded by (host, session) so
// that every copy of a row lands on one shard.
std::vector<std::string> clickhouse_schema(const std::string& database,
                                           const std::string& cluster);

// The table names, in the order a batch is sent (processes first: a query joining spans to
// processes never sees a span without its process).
inline constexpr const char* kClickHouseTables[4] = {"processes", "spans", "drops", "unfinished"};

// `INSERT INTO <database>.<table> (<columns>) FORMAT RowBinary` for one of kClickHouseTables.
std::string clickhouse_insert(const std::string& database, int table);

// Rows of one batch, one RowBinary body per table (indexed like kClickHouseTables).
struct RowBatch {
  std::string body[4];
  uint64_t rows[4] = {0, 0, 0, 0};
  uint64_t bytes() const noexcept {
    return body[0].size() + body[1].size() + body[2].size() + body[3].size();
  }
  uint64_t total_rows() const noexcept { return rows[0] + rows[1] + rows[2] + rows[3]; }
  bool empty() const noexcept { return total_rows() == 0; }
};

// An EventVisitor that turns events into rows. It remembers what later rows need (each pid's
// clock anchor for wall-clock times, each thread's name) and the ordinals that make keys of
// events with no sequence number of their own:
// - a [STRACE] text span has none: its `seq` is its ordinal among its (pid, tid)'s spans in
//   file order (a re-read of the same file gives the same numbers);
// - drops, unfinished and undescribed rows get `n`, their ordinal among the events of the same
//   key (two `no_ring` drops of a run both have pid 0 and first_seq 0).
// So the events must be delivered from the start of the file; `set_quiet(true)` learns from
// events without making rows (replaying the part of a file that was already sent).
class ClickHouseRows final : public EventVisitor {
 public:
  ClickHouseRows(std::string host, std::string session);

  void process(const ProcessEvent& e) override;
  void thread(const ThreadEvent& e) override;
  void span(const SpanEvent& e) override;
  void drops(const DropsEvent& e) override;
  void unfinished(const UnfinishedEvent& e) override;
  void undescribed(const UndescribedEvent& e) override;

  void set_quiet(bool quiet) noexcept { quiet_ = quiet; }
  // The rows made since the last take(), moved out.
  RowBatch take() noexcept;
  const RowBatch& pending() const noexcept { return batch_; }
  // Forgets everything (the file is read again from its start).
  void reset() noexcept;

 private:
  using Tid = std::pair<uint32_t, uint32_t>;  // (pid, tid)
  struct Anchor {
    uint64_t mono_ns, wall_ns;
  };
  void key(std::string& out, uint32_t pid, uint32_t tid);

  std::string host_;
  std::string session_;
  bool quiet_ = false;
  RowBatch batch_;
  EventSpelling spelling_;
  std::map<uint32_t, Anchor> anchors_;
  std::map<Tid, std::string> thread_names_;
  std::map<Tid, uint64_t> text_seq_;  // next ordinal of a text span of (pid, tid)
  std::map<std::tuple<uint32_t, uint32_t, uint8_t, uint64_t>, uint32_t> drop_n_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint64_t>, uint32_t> unfinished_n_;
};

}  // namespace spanring
