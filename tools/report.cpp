#include "tools/report.h"

#include "format/trace_reader.h"
#include "tools/cli_util.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace spanring {
namespace {

// Nearest rank: the smallest value with at least p% of the values at or below it.
uint64_t percentile(std::vector<uint64_t>& v, uint64_t p) {
  const uint64_t n = v.size();
  uint64_t rank = (p * n + 99) / 100;  // ceil(p/100 * n), >= 1 for n >= 1
  if (rank == 0) rank = 1;
  auto it = v.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(v.begin(), it, v.end());
  return *it;
}

std::string us(uint64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%llu.%03u", static_cast<unsigned long long>(ns / 1000),
                static_cast<unsigned>(ns % 1000));
  return buf;
}

std::string pad(std::string s, size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// A text table whose cells never run together: a right-aligned column (numbers) is as wide as
// its `min_width` or its widest cell plus one space, whichever is more, so a wide number (a
// count of 10 digits, a total of hours in us) moves its column over instead of touching its left
// neighbour; a left-aligned column followed by another left-aligned one grows the same way. A
// left-aligned cell before a right-aligned column may overflow into that column's padding (a
// long thread label), which keeps the other rows as they were.
struct Column {
  size_t min_width;
  bool right;  // right-aligned (numbers)
};

std::string render_table(const std::vector<Column>& cols,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    w[c] = cols[c].min_width;
    const bool grows = cols[c].right || (c + 1 < cols.size() && !cols[c + 1].right);
    if (!grows) continue;
    for (const auto& row : rows)
      if (c < row.size()) w[c] = std::max(w[c], row[c].size() + 1);
  }
  std::string o;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < cols.size(); ++c)
      o += pad(row[c], w[c], cols[c].right);
    o += "\n";
  }
  return o;
}

// Raw bytes (a thread name, a command line) shown in a table: printable ASCII as is.
std::string shown(std::string_view raw) { return printable_prefix(raw, raw.size()); }

// An encoded name ([STRACE] spelling) as a person reads it: each %XX is its byte again; bytes
// below 0x20 and 0x7F then show as \xNN (a name may hold a newline), bytes >= 0x80 are kept
// (UTF-8 text shows as text; JSON output replaces invalid UTF-8).
std::string decoded(std::string_view enc) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < enc.size(); ++i) {
    auto c = static_cast<unsigned char>(enc[i]);
    if (c == '%' && i + 2 < enc.size() && hex(enc[i + 1]) >= 0 && hex(enc[i + 2]) >= 0) {
      c = static_cast<unsigned char>(hex(enc[i + 1]) * 16 + hex(enc[i + 2]));
      i += 2;
    }
    if (c < 0x20 || c == 0x7f || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The value of attribute `key` in encoded `k=v` tokens, or "" (a missing or empty value).
std::string_view attr_value(std::string_view attrs, std::string_view key) {
  size_t at = 0;
  while (at < attrs.size()) {
    size_t end = attrs.find(' ', at);
    if (end == std::string_view::npos) end = attrs.size();
    const std::string_view tok = attrs.substr(at, end - at);
    if (tok.size() > key.size() && tok.substr(0, key.size()) == key && tok[key.size()] == '=')
      return tok.substr(key.size() + 1);
    at = end + 1;
  }
  return {};
}

std::string family_of(std::string_view name) {
  return std::string(name.substr(0, name.find('.'))) + ".*";
}

std::string joined(const std::set<std::string>& items, const char* sep) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

// CLOCK_REALTIME ns as UTC, ISO 8601 with nanoseconds: 2026-12-01T16:57:02.497799037Z.
std::string utc(uint64_t wall_ns) {
  const time_t sec = static_cast<time_t>(wall_ns / 1000000000u);
  struct tm tm {};
  gmtime_r(&sec, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09uZ",
                static_cast<unsigned>(wall_ns % 1000000000u));
  return buf;
}

// A duration in ns, in the largest unit that keeps it >= 1 (ns, us, ms, s), 3 decimals.
std::string span_of(uint64_t ns) {
  char buf[48];
  if (ns < 1000) {
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  } else {
    const char* unit = ns < 1000000 ? "us" : ns < 1000000000 ? "ms" : "s";
    const double div = ns < 1000000 ? 1e3 : ns < 1000000000 ? 1e6 : 1e9;
    std::snprintf(buf, sizeof buf, "%.3f %s", static_cast<double>(ns) / div, unit);
  }
  return buf;
}

const char* reason_note(DropReason r) {
  switch (r) {
    case DropReason::kRingFull: return "the ring was full";
    case DropReason::kInvalid: return "the producer refused the record's content";
    case DropReason::kNoRing: return "threads that found every ring taken";
    case DropReason::kCorrupt: return "the ring failed validation and was quarantined";
    case DropReason::kVfork: return "a vfork child emitted before exec";
    case DropReason::kReentrant:
      return "a signal handler emitted while its thread was inside a record write";
    case DropReason::kMaxSize: return "the output had reached --max-size";
    case DropReason::kOverwritten:
      return "drained, but pushed out of the flight recorder's window before this snapshot";
  }
  return "";
}

const char* status_name(ReadResult::Status s) {
  switch (s) {
    case ReadResult::Status::kComplete: return "complete";
    case ReadResult::Status::kCut: return "cut";
    case ReadResult::Status::kCorrupt: return "corrupt";
    case ReadResult::Status::kNotATrace: return "not_a_trace";
  }
  return "";
}

}  // namespace

void TraceReport::process(const ProcessEvent& e) {
  Process& p = procs_[e.pid];
  if (p.anchored) return;  // one anchor per pid: the first
  p.anchored = true;
  p.mono_ns = e.mono_ns;
  p.wall_ns = e.wall_ns;
  p.cmdline = std::string(e.cmdline);
  std::replace(p.cmdline.begin(), p.cmdline.end(), '\0', ' ');
}

void TraceReport::thread(const ThreadEvent& e) {
  thread_of(e.pid, e.tid).name = std::string(e.name);
}

void TraceReport::span(const SpanEvent& e) {
  const EventSpelling::Span s = spelling_.span(e);
  NameStats& n = names_[std::string(s.name)];
  n.durations.push_back(e.dur_ns);
  n.total += e.dur_ns;
  n.max = std::max(n.max, e.dur_ns);
  n.device |= s.device;
  Thread& t = thread_of(e.pid, e.tid);
  ++t.records;
  ++records_;
  if (t.families.size() < 8) t.families.insert(decoded(family_of(s.name)));  // a label only
  const std::string_view role = attr_value(s.attrs, "role");
  if (!role.empty()) {
    std::set<std::string>& workers = t.roles[decoded(role)];
    const std::string_view worker = attr_value(s.attrs, "worker_id");
    if (role == "worker" && !worker.empty() && workers.size() < 4) workers.insert(decoded(worker));
  }
  if (!s.device) {
    ++host_records_;
    if (e.ts_ns < first_ts_ns_) {
      first_ts_ns_ = e.ts_ns;
      first_pid_ = e.pid;
    }
    const uint64_t end = e.ts_ns + e.dur_ns < e.ts_ns ? UINT64_MAX : e.ts_ns + e.dur_ns;
    last_end_ns_ = std::max(last_end_ns_, end);
  }
}

std::string TraceReport::Thread::role_label() const {
  std::string label;
  for (const auto& [role, workers] : roles) {
    std::string one;
    // The lane names of the [STRACE] tool (strace-format.md, "Span families").
    if (role == "facade") one = "orchestrator / facade";
    else if (role == "worker") one = workers.empty() ? "worker" : "worker " + joined(workers, ",");
    else one = role;
    label += (label.empty() ? "" : ", ") + one;
  }
  return label;
}

std::string TraceReport::Thread::label() const {
  const std::string role = role_label();
  if (!name.empty()) return role.empty() ? shown(name) : shown(name) + " [" + role + "]";
  if (!role.empty()) return role;
  return joined(families, ", ");
}

std::set<std::string> TraceReport::Process::families() const {
  std::set<std::string> f;
  for (const auto& [tid, t] : threads) f.insert(t.families.begin(), t.families.end());
  return f;
}

std::map<std::pair<uint32_t, uint32_t>, TraceReport::ThreadDrops> TraceReport::folded_drops()
    const {
  std::map<std::pair<uint32_t, uint32_t>, ThreadDrops> folded;
  for (const Drop& d : drops_) {
    ThreadDrops& f = folded[{d.pid, d.tid}];
    f.dropped += d.dropped;
    f.by_reason[drop_reason_name(d.reason)] += d.dropped;
    if (d.reason == DropReason::kNoRing || d.reason == DropReason::kVfork ||
        d.reason == DropReason::kMaxSize)
      continue;  // no seq
    ++f.ranges;
    f.first_seq = std::min(f.first_seq, d.first_seq);
    f.last_seq = std::max(f.last_seq, d.last_seq);
  }
  return folded;
}

uint64_t TraceReport::wall_start_ns() const {
  if (host_records_ == 0) return 0;
  const auto p = procs_.find(first_pid_);
  if (p == procs_.end() || !p->second.anchored || p->second.mono_ns > first_ts_ns_) return 0;
  return p->second.wall_ns + (first_ts_ns_ - p->second.mono_ns);
}

void TraceReport::drops(const DropsEvent& e) {
  drops_.push_back(Drop{e.pid, e.tid, e.dropped, e.first_seq, e.last_seq, e.reason});
  thread_of(e.pid, e.tid).dropped += e.dropped;
  dropped_ += e.dropped;
}

void TraceReport::unfinished(const UnfinishedEvent& e) {
  unfinished_.push_back(Unfinished{e.pid, e.tid, e.inv, e.depth,
                                   std::string(spelling_.unfinished_name(e)), e.ts_ns, 0});
  ++thread_of(e.pid, e.tid).unfinished;
  ++unfinished_count_;
}

void TraceReport::undescribed(const UndescribedEvent& e) {
  unfinished_.push_back(Unfinished{e.pid, e.tid, 0, 0, {}, 0, e.count});
  thread_of(e.pid, e.tid).unfinished += e.count;
  unfinished_count_ += e.count;
}

std::vector<TraceReport::Row> TraceReport::rows() {
  std::vector<Row> rows;
  for (auto& [name, n] : names_) {
    const uint64_t count = n.durations.size();
    const uint64_t total = n.total > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(n.total);
    rows.push_back(Row{name, count, total, percentile(n.durations, 50),
                       percentile(n.durations, 99), n.max,
                       static_cast<double>(n.total) / static_cast<double>(count), n.device});
  }
  // Where the time went first; ties by name, so that the order is stable.
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return rows;
}

nlohmann::json TraceReport::to_json(const ReadResult& result, const std::string& source) {
  using nlohmann::json;
  json j;
  j["source"] = source;
  j["format"] = result.format;
  j["bytes"] = result.bytes_read;
  j["status"] = status_name(result.status);
  if (!result.message.empty()) j["problem"] = result.message;
  j["notes"] = result.notes;
  // Every time in this JSON is in ns: host spans CLOCK_MONOTONIC, clk=dev spans device clock.
  j["clock"] = {{"host", "CLOCK_MONOTONIC"}, {"unit", "ns"}, {"device_spans", "clk=dev"}};
  json window;
  if (host_records_ != 0) {
    window["first_ts_ns"] = first_ts_ns_;
    window["last_end_ns"] = last_end_ns_;
    window["duration_ns"] = last_end_ns_ - first_ts_ns_;
    const uint64_t wall = wall_start_ns();
    window["wall_start_ns"] = wall != 0 ? json(wall) : json();
    window["wall_start_utc"] = wall != 0 ? json(utc(wall)) : json();
  }
  j["window"] = window;
  j["records"] = records_;
  j["dropped"] = dropped_;
  j["unfinished"] = unfinished_count_;
  uint64_t processes = 0, threads = 0;
  for (const auto& [pid, p] : procs_) {
    if (pid == 0) continue;  // pid 0 holds only records lost outside any thread
    ++processes;
    threads += p.threads.size();
  }
  j["processes"] = processes;
  j["threads"] = threads;
  json names = json::array();
  for (const Row& r : rows())
    names.push_back({{"name", r.name}, {"decoded_name", decoded(r.name)}, {"count", r.count},
                     {"total_ns", r.total_ns}, {"mean_ns", r.mean_ns}, {"p50_ns", r.p50_ns},
                     {"p99_ns", r.p99_ns}, {"max_ns", r.max_ns}, {"device_clock", r.device}});
  j["names"] = names;
  json procs = json::array();
  for (const auto& [pid, p] : procs_) {
    json pj{{"pid", pid}, {"cmdline", shown(p.cmdline)}};
    pj["anchor"] = p.anchored ? json{{"mono_ns", p.mono_ns}, {"wall_ns", p.wall_ns}} : json();
    const std::set<std::string> fam = p.families();
    pj["families"] = std::vector<std::string>(fam.begin(), fam.end());
    uint64_t rec = 0, drop = 0, unf = 0;
    json tj = json::array();
    for (const auto& [tid, t] : p.threads) {
      tj.push_back({{"tid", tid}, {"name", shown(t.name)}, {"role", t.role_label()},
                    {"label", t.label()}, {"records", t.records}, {"dropped", t.dropped},
                    {"unfinished", t.unfinished}});
      rec += t.records;
      drop += t.dropped;
      unf += t.unfinished;
    }
    pj["records"] = rec;
    pj["dropped"] = drop;
    pj["unfinished"] = unf;
    pj["threads"] = tj;
    procs.push_back(pj);
  }
  j["by_process"] = procs;
  json dj = json::array();
  for (const Drop& d : drops_)
    dj.push_back({{"pid", d.pid}, {"tid", d.tid}, {"dropped", d.dropped},
                  {"first_seq", d.first_seq}, {"last_seq", d.last_seq},
                  {"reason", drop_reason_name(d.reason)}});
  j["drops"] = dj;
  json fj = json::array();
  for (const auto& [pt, f] : folded_drops()) {
    json one{{"pid", pt.first}, {"tid", pt.second}, {"dropped", f.dropped},
             {"ranges", f.ranges}, {"reasons", f.by_reason}};
    one["first_seq"] = f.ranges != 0 ? json(f.first_seq) : json();
    one["last_seq"] = f.ranges != 0 ? json(f.last_seq) : json();
    fj.push_back(one);
  }
  j["drops_by_thread"] = fj;
  json uj = json::array();
  for (const Unfinished& u : unfinished_) {
    if (u.undescribed > 0)
      uj.push_back({{"pid", u.pid}, {"tid", u.tid}, {"undescribed", u.undescribed}});
    else
      uj.push_back({{"pid", u.pid}, {"tid", u.tid}, {"inv", u.inv}, {"depth", u.depth},
                    {"name", u.name}, {"ts_ns", u.ts_ns}});
  }
  j["unfinished_spans"] = uj;
  return j;
}

std::string TraceReport::to_text(const ReadResult& result, const std::string& source) {
  std::string o;
  o += "spanring report: " + source + " (" + result.format + ", " +
       std::to_string(result.bytes_read) + " bytes)\n";
  o += "clock: host spans CLOCK_MONOTONIC ns, tables in us; clk=dev spans device-clock ns, in a "
       "table of their own\n";
  if (host_records_ != 0) {
    o += "window: ts " + std::to_string(first_ts_ns_) + " .. " + std::to_string(last_end_ns_) +
         " (" + span_of(last_end_ns_ - first_ts_ns_) + ")";
    const uint64_t wall = wall_start_ns();
    o += wall != 0 ? ", starting " + utc(wall) + " (wall clock, from the clock anchors)\n"
                   : ", wall-clock start unknown (no clock anchor before the first span)\n";
  } else {
    o += "window: no host span\n";
  }
  uint64_t processes = 0, threads = 0;
  for (const auto& [pid, p] : procs_) {
    if (pid == 0) continue;
    ++processes;
    threads += p.threads.size();
  }
  o += "processes: " + std::to_string(processes) + "  threads: " + std::to_string(threads) +
       "  records: " + std::to_string(records_) + "  lost: " + std::to_string(dropped_) +
       " dropped, " + std::to_string(unfinished_count_) + " unfinished\n";
  if (result.status == ReadResult::Status::kCut) o += "CUT: " + result.message + "\n";
  for (const std::string& n : result.notes) o += "note: " + n + "\n";
  if (records_ == 0) o += "no records: the trace holds no span\n";

  const std::vector<Row> table = rows();
  // One table per clock, each in one unit.
  for (const bool device : {false, true}) {
    size_t w = 9;
    bool any = false;
    for (const Row& r : table) {
      if (r.device != device) continue;
      any = true;
      w = std::max(w, decoded(r.name).size());
    }
    if (!any) continue;
    const char* unit = device ? "ns" : "us";
    auto t = [&](uint64_t ns) { return device ? std::to_string(ns) : us(ns); };
    o += device ? "\ndevice-clock spans (clk=dev; device-clock ns, not comparable with host "
                  "time)\n"
                : "\nhost spans (CLOCK_MONOTONIC; us)\n";
    const std::string u(unit);
    std::vector<std::vector<std::string>> cells{
        {"span name", "count", "total " + u, "mean " + u, "p50 " + u, "p99 " + u, "max " + u}};
    for (const Row& r : table) {
      if (r.device != device) continue;
      cells.push_back({decoded(r.name), std::to_string(r.count), t(r.total_ns),
                       t(static_cast<uint64_t>(r.mean_ns + 0.5)), t(r.p50_ns), t(r.p99_ns),
                       t(r.max_ns)});
    }
    o += render_table({{w, false}, {10, true}, {16, true}, {14, true}, {14, true}, {14, true},
                       {14, true}},
                      cells);
  }

  if (!procs_.empty()) {
    size_t tw = 6;
    for (const auto& [pid, p] : procs_)
      for (const auto& [tid, th] : p.threads) tw = std::max(tw, std::min<size_t>(th.label().size(), 40));
    std::vector<std::vector<std::string>> cells{
        {"pid", "tid", "thread", "records", "dropped", "unfinished", "  command line"}};
    for (const auto& [pid, p] : procs_) {
      uint64_t rec = 0, drop = 0, unf = 0;
      for (const auto& [tid, t] : p.threads) {
        rec += t.records;
        drop += t.dropped;
        unf += t.unfinished;
      }
      std::string what = pid == 0 ? "(records lost outside any thread)"
                                  : shown(p.cmdline).substr(0, 100);
      if (what.empty()) {
        const std::set<std::string> fam = p.families();
        // [STRACE] text has no field for it; a binary trace lacks it when the process had
        // exited before the drainer read /proc/PID/cmdline.
        what = std::string(result.format == "[STRACE] text" ? "(no command line in [STRACE] text)"
                                                            : "(command line not recorded)") +
               (fam.empty() ? "" : " spans: " + joined(fam, ", "));
      }
      cells.push_back({std::to_string(pid), "", "", std::to_string(rec), std::to_string(drop),
                       std::to_string(unf), "  " + what});
      if (pid == 0) continue;
      for (const auto& [tid, t] : p.threads)
        cells.push_back({"", std::to_string(tid), t.label(), std::to_string(t.records),
                         std::to_string(t.dropped), std::to_string(t.unfinished)});
    }
    o += "\n" + render_table({{10, false}, {10, false}, {tw + 2, false}, {10, true}, {10, true},
                              {12, true}, {0, false}},
                             cells);
  }

  if (!drops_.empty()) {
    o += "\ndrops (records that are not in the trace), per thread:\n";
    for (const auto& [pt, f] : folded_drops()) {
      const auto& [pid, tid] = pt;
      if (pid == 0 && tid == 0) {
        o += "  outside any thread: " + std::to_string(f.dropped) + " record(s)";
      } else {
        o += "  pid " + std::to_string(pid) + " tid " + std::to_string(tid);
        const auto p = procs_.find(pid);
        if (p != procs_.end()) {
          const auto t = p->second.threads.find(tid);
          if (t != p->second.threads.end() && !t->second.label().empty())
            o += " (" + t->second.label() + ")";
        }
        o += ": " + std::to_string(f.dropped) + " record(s)";
      }
      if (f.ranges != 0)
        o += " in " + std::to_string(f.ranges) + " range(s), seq " +
             std::to_string(f.first_seq) + ".." + std::to_string(f.last_seq);
      o += ", reason ";
      bool first = true;
      for (const auto& [reason, n] : f.by_reason) {
        if (!first) o += "; ";
        first = false;
        o += reason;
        if (f.by_reason.size() > 1) o += " " + std::to_string(n);
        for (const DropReason r : {DropReason::kRingFull, DropReason::kInvalid,
                                   DropReason::kNoRing, DropReason::kCorrupt, DropReason::kVfork,
                                   DropReason::kReentrant, DropReason::kMaxSize})
          if (reason == drop_reason_name(r)) o += std::string(" (") + reason_note(r) + ")";
      }
      o += "\n";
    }
  }
  if (!unfinished_.empty()) {
    o += "\nunfinished spans (open when their process died; not counted above):\n";
    for (const Unfinished& u : unfinished_) {
      o += "  pid " + std::to_string(u.pid) + " tid " + std::to_string(u.tid) + ": ";
      if (u.undescribed > 0)
        o += std::to_string(u.undescribed) + " span(s) nested deeper than " +
             std::to_string(kOpenSpanMax) + ", not described\n";
      else
        o += decoded(u.name) + " (depth " + std::to_string(u.depth) + ", inv " +
             std::to_string(u.inv) + "), started at ts=" + std::to_string(u.ts_ns) + "\n";
    }
  }
  return o;
}

int run_report(TraceInput& in, TraceOutput& out, bool json, std::string* err) {
  if (is_empty_input(in)) {
    *err = in.name() + " is not a trace: it is empty (0 bytes)";
    return kExitFailed;
  }
  TraceReport report;
  const ReadResult r = read_trace(in, report);
  if (r.holds_nothing()) {
    *err = in.name() + " holds no trace: " + r.message;
    return 1;
  }
  switch (r.status) {
    case ReadResult::Status::kNotATrace:
      *err = in.name() + " is not a trace: " + r.message;
      return 1;
    case ReadResult::Status::kCorrupt:
      *err = in.name() + " is corrupt: " + r.message;
      return 1;
    case ReadResult::Status::kCut:
      *err = in.name() + ": " + r.message;
      break;
    case ReadResult::Status::kComplete:
      break;
  }
  // Replace rather than throw on bytes that are not UTF-8 (a path, say): every other string in
  // the report is encoded or escaped already.
  if (json)
    out.write(report.to_json(r, in.name()).dump(2, ' ', false,
                                                nlohmann::json::error_handler_t::replace) +
              "\n");
  else out.write(report.to_text(r, in.name()));
  return 0;
}

}  // namespace spanring
