// `spanring report FILE [--json]`: what a trace holds, and what it lost.
//
// Per span name: count, total, mean, p50, p99 and max duration (nearest-rank percentiles over
// every span, exact). Per process and thread: records, drops and unfinished spans. Drop ranges
// (with their reasons) and unfinished spans are listed under the tables and are not counted in
// them: a cut or lossy trace is a stated fact, never a silently smaller number.
//
// Input: a binary trace or [STRACE] text (format/trace_reader.h tells them apart).
#pragma once

#include "format/convert_io.h"
#include "format/event_spelling.h"
#include "format/event_visitor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
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
  };
  struct Process {
    bool anchored = false;
    uint64_t mono_ns = 0;
    uint64_t wall_ns = 0;
    std::string cmdline;  // arguments joined by spaces
    std::map<uint32_t, Thread> threads;
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
  Thread& thread_of(uint32_t pid, uint32_t tid) { return procs_[pid].threads[tid]; }

  EventSpelling spelling_;
  std::map<std::string, NameStats> names_;
  std::map<uint32_t, Process> procs_;
  std::vector<Drop> drops_;
  std::vector<Unfinished> unfinished_;
  uint64_t records_ = 0;
  uint64_t dropped_ = 0;
  uint64_t unfinished_count_ = 0;
};

// Runs `spanring report`: reads `in`, writes the report (text or JSON) to `out`, problems to
// `err`. Returns the exit status: 0 for a trace (complete or cut: said so; a trace with no span
// says so too), 1 when the input is not a trace, is corrupt, or is empty (0 bytes), with nothing
// written to `out`.
int run_report(TraceInput& in, TraceOutput& out, bool json, std::string* err);

}  // namespace spanring
