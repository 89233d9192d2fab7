// `spanring export`: ships traces into ClickHouse (docs/clickhouse.md), decoupled from the
// drainer: the drainer writes its file as always (the durable log) and the exporter reads it.
//
//   spanring export FILE... --clickhouse URL [--host-id NAME] [--session ID]   finished traces
//   spanring export --follow FILE --clickhouse URL [--while-pid PID] ...       a file being written
//   spanring export --create-schema --clickhouse URL [--cluster NAME]          only the tables
//
// Finished traces: binary or [STRACE] text (format/trace_reader.h), read front to back, rows
// sent in batches of at most `batch_bytes` (bounded memory), a progress bar on a terminal.
// --follow: a binary trace that a drainer is writing; only complete blocks whose checksums
// match are read (the drainer writes whole blocks), and the position (in a state file, written
// after each acknowledged batch) only moves past what ClickHouse acknowledged, so a restarted
// exporter resumes there. It stops when `while_pid` has exited and the file is read to its end,
// or when the caller asks it to (stop_requested: the CLI's SIGINT/SIGTERM).
//
// ClickHouse slow, down or refusing: a batch is retried with back-off (100 ms doubling to 5 s);
// memory stays at one batch, since no more of the file is read meanwhile. A finished-trace
// export gives a batch up after `retry_for` of failures, a follower only once the workload has
// ended (then after `retry_for`) or on a stop request; what was given up is counted in the
// summary line and stays in the file (exporting again sends it; rows already sent are not
// counted twice: clickhouse_rows.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spanring {

struct ExportOptions {
  std::vector<std::string> files;
  std::string url;               // ClickHouse's HTTP interface, http://HOST:PORT
  std::string host;              // rows' `host`; empty: gethostname()
  std::string session;           // rows' `session`; empty: derived from each file's first bytes
  std::string database = "spanring";
  std::string cluster;           // non-empty: --create-schema also makes the _all tables
  bool create_schema = false;    // only create the tables (no files), or create them before
  bool follow = false;
  int while_pid = 0;             // --follow: stop once this process has exited (0: no such)
  std::string state;             // --follow: the state file; empty: FILE + ".export-state"
  // RowBinary bytes per batch. 16 MiB (~100 k spans of ~150 bytes): ClickHouse makes one part
  // per insert and wants few, large ones; measured here (bench/clickhouse-export), 1 MiB batches
  // took 17 s for 875 k records, 4 MiB 7.3 s, 32 MiB 3.8 s, waiting on the server each time.
  uint64_t batch_bytes = 16u << 20;
  std::chrono::milliseconds retry_for{30000};  // give a batch up after this much failing
  std::chrono::milliseconds flush_every{1000};  // --follow: send a partial batch this often
  std::chrono::milliseconds timeout{30000};  // one HTTP request
  // Polled while reading, waiting and retrying (every 20 ms at most): true stops the export,
  // which sends what it has read (one attempt per batch) and reports. Empty: never.
  std::function<bool()> stop_requested;
};

// Exports `o.files` (or only creates the schema). Writes one `spanring: export summary: ...` line per file to stderr
// (docs/clickhouse.md) and, when rows were not delivered, a warning naming why. Returns the exit
// status: 0 every row delivered (also for a cut file: the cut is said), 1 rows not delivered or
// a corrupt or unreadable trace, 2 the schema could not be created. Throws Error for usage
// errors found late (a file that cannot be opened).
int export_traces(const ExportOptions& o);

// The session a file's rows get when none is given: 16 hex digits of a 64-bit FNV-1a hash of
// its first bytes (binary: the file header and the first block's header, which holds that
// block's CRC; text: its first 64 KiB). The same file gives the same session, so exporting it
// twice replaces rows instead of adding them. Empty when the file is binary and its first block
// is not complete yet. Throws Error when the file cannot be read.
std::string derive_session(const std::string& path);

}  // namespace spanring
