// What the fault tests (suite 'fault') check on every trace, on top of tests/strace_parser.h.
//
// The fault tests produce lines the shared helpers in tests/mp_util.h do not expect:
// `[SPANRING_UNFINISHED]` lines (spans open when their process was killed) and segment-wide
// `[SPANRING_DROPS] ... pid=0 tid=0 ... reason=vfork` lines, and some of their traces hold a
// million records, so this file scans a trace once, line by line, without keeping the spans,
// and returns what it found as data. Every check here returns a list of problems rather than
// asserting, so that each test can also run a check on deliberately broken input and see it
// fail (the negative controls in test_fault_check.cpp and in the tests themselves).
//
// The expected encodings are computed by spec_encode(), written from shared/strace-format.md
// ("Encoding of name and attrs", "Truncation"), not from src/encode.cpp.
#pragma once

#include "strace_parser.h"
#include "traced_run.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fault {

using spanring_test::AnchorLine;
using spanring_test::DropsLine;
using spanring_test::SpanLine;
using spanring_test::stress;
using spanring_test::Summary;

using Owner = std::pair<uint64_t, uint64_t>;  // (pid, tid)

// One `[SPANRING_UNFINISHED]` line (drain/drainer.cpp, report_unfinished). Two forms:
//   [SPANRING_UNFINISHED] v=1 pid=P tid=T inv=I depth=D name=N ts=S reason=owner_died
//   [SPANRING_UNFINISHED] v=1 pid=P tid=T undescribed=K reason=owner_died_deeper_than_M
struct UnfinishedLine {
  bool described = true;
  uint64_t pid = 0;
  uint64_t tid = 0;
  uint64_t inv = 0;
  uint64_t depth = 0;
  std::string name;  // encoded, as in the line
  uint64_t ts = 0;
  uint64_t undescribed = 0;  // the second form: spans open deeper than the described ones
  std::string reason;
};
// Parses one line including its LF. nullopt and *error set when it is not exactly one of the
// two forms (numbers unsigned decimal, name a valid encoded [STRACE] name).
std::optional<UnfinishedLine> parse_unfinished(std::string_view line, std::string* error);

// Everything a scan of one trace file found.
struct TraceFacts {
  uint64_t lines = 0;
  std::vector<std::string> errors;  // unparseable lines, "line N: why [text]"; at most 20 kept
  uint64_t error_count = 0;
  uint64_t span_lines = 0;
  std::map<std::string, uint64_t> spans_by_name;  // encoded name -> [STRACE] lines
  std::map<Owner, uint64_t> spans_by_owner;
  std::map<uint64_t, std::string> first_name_of_pid;  // for messages
  std::vector<AnchorLine> anchors;
  std::vector<DropsLine> drops;  // in file order
  std::vector<UnfinishedLine> unfinished;
  // Anchor rules, found while scanning: a span before its pid's anchor, a host span starting
  // before its pid's anchor mono_ns, a prefix E != ts + dur, a second anchor of a pid.
  std::vector<std::string> order_problems;

  uint64_t dropped_total() const;
  uint64_t dropped_with_reason(const std::string& reason) const;
  uint64_t drop_lines_with_reason(const std::string& reason) const;
  std::map<Owner, uint64_t> dropped_by_owner() const;  // owner drops only (not pid=0 tid=0)
  uint64_t unfinished_total() const;  // described lines + the sum of undescribed=
  uint64_t spans(const std::string& name) const;
};

// Called for every [STRACE] line, with its 1-based line number.
using SpanFn = std::function<void(const SpanLine&, uint64_t line_no)>;
// Reads and parses every line of `path` (tests/strace_parser.h for [STRACE], [CLOCK_ANCHOR] and
// [SPANRING_DROPS], parse_unfinished() for [SPANRING_UNFINISHED]; anything else is an error).
TraceFacts scan_trace(const std::string& path, const SpanFn& on_span = nullptr);
// The same on text in memory (the negative controls).
TraceFacts scan_text(std::string_view text, const SpanFn& on_span = nullptr);

// The invariants every `spanring run` trace must satisfy, as problems (empty = all hold):
// every line parses; each pid with a span has one anchor, before its first span, with mono_ns
// <= its host spans' ts; E == ts + dur; the summary's written/dropped/unfinished equal the
// file's span lines / sum of dropped= / unfinished lines (+ undescribed=); processes and threads
// equal the distinct pids and (pid, tid) of spans, owner drop lines and unfinished lines
// (segment-wide drop lines, pid=0 tid=0, have no owner); segment-wide drop lines have
// first_seq=last_seq=0; `spanring: wrote N records to PATH` has N == written and PATH == out.
std::vector<std::string> invariant_problems(const TraceFacts& facts, const Summary& summary,
                                            const std::string& stderr_text,
                                            const std::string& out_path);

// "" when empty, else the problems, one per line (at most `max`, then how many more).
std::string describe(const std::vector<std::string>& problems, size_t max = 15);

// The pid of `spanring run` from its stderr line `spanring: segment spanring-<pid>-<hex> ...`.
std::optional<uint64_t> spanring_pid(const std::string& stderr_text);

// `key=<unsigned decimal>` among a span's (encoded) attributes.
std::optional<uint64_t> attr_u64(const SpanLine& span, std::string_view key);

// The [STRACE] encoding of raw bytes, from the spec: input ends at the first NUL; printable
// ASCII 0x20-0x7E except % [ ] is copied (in names also except space and =), every other byte
// is %XX (uppercase); units are appended while the next whole unit fits under the cap (name 64,
// attrs 192); if the input did not fit, an output exactly at the cap loses its whole last unit,
// then `~` is appended. `went_on`: `raw` is only a prefix of the input, which continued (the
// producer kept only those bytes): the output is cut as if the next unit did not fit.
std::string spec_encode(std::string_view raw, bool is_name, bool went_on = false);

}  // namespace fault
