// `spanring report FILE [--json]`: what a trace holds, and what it lost, read at a glance.
//
// First lines: the input, the host clock and units, the time window (first span start and last
// span end of the host spans, and the wall-clock time of that start from the clock anchors),
// processes, threads, records and losses. Then per span name: count, total, mean, p50, p99 and
// max duration (nearest-rank percentiles over every span, exact), one unit per table: host
// spans in us, device-clock spans (clk=dev) in a table of their own in device-clock ns. Names
// are shown decoded (`%20` as a space; control bytes as \xNN). Per process and thread:
// records, drops and unfinished spans; the thread column holds what the trace says of a thread
// (the kernel's name, binary traces only, and the lane its node.* spans' `role` names, as the
// [STRACE] tool labels lanes: "orchestrator / facade", "scheduler", "worker N"), else the span
// families on it; the process column the command line (binary traces), else the families.
// Drops are folded per thread (records, ranges, first..last seq, reasons) and, with unfinished
// spans, listed under the tables and not counted in them: a cut or lossy trace is a stated
// fact, never a silently smaller number. --json holds the same, in ns.
//
// Input: a binary trace or [STRACE] text (format/trace_reader.h tells them apart).
#pragma once

#include "format/convert_io.h"
#include "format/event_spelling.h"
#include "format/event_visitor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace spanring {

class TraceReport final : public EventVisitor {
 public:
  __extension__ typedef unsigned __int128 Uint128;  // GCC/Clang; __extension__: not ISO C++

  // The events of a trace (format/event_visitor.h), counted and kept for the tables.
  void process(const ProcessEvent& e) override;
  void thread(const ThreadEvent& e) override;
  void span(const SpanEvent& e) override;
  void drops(const DropsEvent& e) override;
  void unfinished(const UnfinishedEvent& e) override;
  void undescribed(const UndescribedEvent& e) override;

  // The report of what was read; `result` says how reading ended, `source` names the input.
  nlohmann::json to_json(const ReadResult& result, const std::string& source);
  std::string to_text(const ReadResult& result, const std::string& source);
  uint64_t records() const noexcept { return records_; }

 private:
  struct NameStats {
    std::vector<uint64_t> durations;
    Uint128 total = 0;  // a sum of 64-bit durations cannot overflow it
    uint64_t max = 0;
    bool device = false;  // at least one clk=dev span (its durations are device-clock ns)
  };
  struct Thread {
    std::string name;
    uint64_t records = 0;
    uint64_t dropped = 0;
    uint64_t unfinished = 0;
    std::map<std::string, std::set<std::string>> roles;  // role= value -> worker_id= values
    std::set<std::string> families;                      // first words of its span names
    std::string role_label() const;  // "scheduler", "worker 1", ...; "" when no role
    std::string label() const;       // what the thread column shows
  };
  struct Process {
    bool anchored = false;
    uint64_t mono_ns = 0;
    uint64_t wall_ns = 0;
    std::string cmdline;  // arguments joined by spaces
    std::map<uint32_t, Thread> threads;
    std::set<std::string> families() const;
  };
  // The drops of one thread (pid 0 tid 0: records lost outside any thread), folded.
  struct ThreadDrops {
    uint64_t dropped = 0;
    uint64_t ranges = 0;           // [SPANRING_DROPS] events with a seq range
    uint64_t first_seq = UINT64_MAX, last_seq = 0;
    std::map<std::string, uint64_t> by_reason;  // reason name -> records
  };
  struct Drop {
    uint32_t pid, tid;
    uint64_t dropped, first_seq, last_seq;
    DropReason reason;
  };
  struct Unfinished {
    uint32_t pid, tid;
    uint64_t inv;
    uint32_t depth;
    std::string name;
    uint64_t ts_ns;
    uint64_t undescribed;  // > 0: a count of undescribed spans (no name)
  };
  struct Row {  // one line of the per-name table
    std::string name;
    uint64_t count, total_ns, p50_ns, p99_ns, max_ns;
    double mean_ns;
    bool device;
  };
  std::vector<Row> rows();
  std::map<std::pair<uint32_t, uint32_t>, ThreadDrops> folded_drops() const;
  // The wall-clock ns of first_ts_ns_ from the anchor of first_pid_ (only when that anchor's
  // mono_ns <= first_ts_ns_, as the spec converts), or 0 when unknown.
  uint64_t wall_start_ns() const;
  Thread& thread_of(uint32_t pid, uint32_t tid) { return procs_[pid].threads[tid]; }

  EventSpelling spelling_;
  std::map<std::string, NameStats> names_;
  std::map<uint32_t, Process> procs_;
  std::vector<Drop> drops_;
  std::vector<Unfinished> unfinished_;
  uint64_t records_ = 0;
  uint64_t host_records_ = 0;
  uint64_t first_ts_ns_ = UINT64_MAX;  // of the host spans
  uint64_t last_end_ns_ = 0;           // max ts + dur of the host spans
  uint32_t first_pid_ = 0;             // the pid of the span that starts at first_ts_ns_
  uint64_t dropped_ = 0;
  uint64_t unfinished_count_ = 0;
};

// Runs `spanring report`: reads `in`, writes the report (text or JSON) to `out`, problems to
// `err`. Returns the exit status: 0 for a trace (complete or cut: said so; a trace with no span
// says so too), 1 when the input is not a trace, is corrupt, or is empty (0 bytes), with nothing
// written to `out`.
int run_report(TraceInput& in, TraceOutput& out, bool json, std::string* err);

}  // namespace spanring
