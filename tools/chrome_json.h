// `spanring convert --to chrome`: a trace as Chrome trace-event JSON (the "JSON Object Format"
// that chrome://tracing, Perfetto UI and Catapult open). What the user sees is described in
// docs/binary-format.md ("Chrome / Perfetto JSON"); in short:
//
//   - one process per traced pid (M process_name from its command line, or "pid N" from a text
//     trace, which has none), one lane per thread (M thread_name from the thread's name);
//   - each span is an `X` event, ts/dur in µs with three decimals (exact ns), category "host" or
//     "device", args = inv, hid, depth and every attribute (`k=v`, integer-looking values as
//     numbers);
//   - `clk=dev` spans go to a separate process per traced pid, "device clock of pid N", with
//     pid kDevicePidBase + N, because their ts is a device-clock offset, not host time;
//   - a flow arrow (`s`/`f`, bound to the enclosing slices) from each `*.submit` to the
//     `*.dispatch` with the same (pid, prefix, run_id, task_slot);
//   - drops and unfinished spans are instant events (`i`, thread scope) on their thread's lane;
//     records lost outside any thread (no_ring, vfork) on a process of their own, kLostPid;
//   - the clock anchors, to turn ts into wall-clock time, in the process_name args and in
//     otherData.
//
// Streaming: events are written as they are read (nothing is kept per span), so a trace of any
// size converts in constant memory, except for flow ends waiting for their partner.
#pragma once

#include "format/convert_io.h"
#include "format/event_spelling.h"
#include "format/event_visitor.h"

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace spanring {

// Synthetic pids, above every Linux pid (pid_max is at most 2^22).
inline constexpr uint32_t kDevicePidBase = 1u << 30;    // device clock of pid N: base + N
inline constexpr uint32_t kLostPid = (1u << 30) - 1;    // drops outside any ring owner

class ChromeTraceWriter final : public EventVisitor {
 public:
  // `source` names the input in the metadata.
  ChromeTraceWriter(TraceOutput& out, std::string source);

  // The events of a trace in file order (format/event_visitor.h); each writes its JSON as it
  // comes. Throw only what TraceOutput throws.
  void process(const ProcessEvent& e) override;
  void thread(const ThreadEvent& e) override;
  void span(const SpanEvent& e) override;
  void drops(const DropsEvent& e) override;
  void unfinished(const UnfinishedEvent& e) override;
  void undescribed(const UndescribedEvent& e) override;

  // Places the instants still waiting for a time, writes the metadata and closes the JSON.
  // `result` is what the reader said (a cut or corrupt input is noted in the metadata).
  void finish(const ReadResult& result);

 private:
  struct Process {
    bool anchored = false;
    uint64_t mono_ns = 0;
    uint64_t wall_ns = 0;
    std::string label;  // from the command line
    bool named = false;
    bool device_named = false;
  };
  struct Lane {
    bool named = false;
    std::string name;       // the thread's own name (binary traces)
    bool has_end = false;
    uint64_t last_end = 0;  // end of the lane's last host span, ns
  };
  // An instant that has no time of its own (drops, undescribed): placed at the end of the
  // lane's last span, or at the start of its first one.
  struct Pending {
    uint32_t pid, tid;
    std::string name;
    std::string args;  // a JSON object
  };
  struct FlowEnd {
    uint32_t pid, tid;
    uint64_t at_ns;
  };

  void begin_event();
  void name_process(uint32_t pid);
  void name_device_process(uint32_t pid);
  void name_lane(uint32_t chrome_pid, uint32_t tid, uint32_t host_pid, bool device);
  void instant(uint32_t chrome_pid, uint32_t tid, uint64_t ts_ns, const std::string& name,
               const std::string& args);
  void flow(const SpanEvent& e, const EventSpelling::Span& sp);
  void place_pending(uint32_t pid, uint32_t tid, uint64_t ts_ns);

  TraceOutput& out_;
  EventSpelling spelling_;
  std::string source_;
  std::string ev_;  // the event being built
  bool first_ = true;
  uint64_t flow_id_ = 0;
  bool has_host_end_ = false;
  uint64_t max_host_end_ = 0;
  std::map<uint32_t, Process> procs_;
  std::unordered_map<uint64_t, Lane> lanes_;  // (chrome pid << 32) | tid
  std::vector<Pending> pending_;
  std::unordered_map<std::string, std::deque<FlowEnd>> submits_, dispatches_;
  uint64_t flows_ = 0;
};

// Appends `s` as a JSON string: UTF-8 kept, control characters escaped, invalid bytes replaced
// by U+FFFD, so that the output always passes a strict parser.
void append_json_string(std::string& out, std::string_view s);

}  // namespace spanring
