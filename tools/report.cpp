#include "tools/report.h"

#include "format/trace_reader.h"

#include <algorithm>
#include <cstdio>

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

// Raw bytes (a thread name, a command line) shown in a table: printable ASCII as is.
std::string shown(std::string_view raw) { return printable_prefix(raw, raw.size()); }

const char* reason_note(DropReason r) {
  switch (r) {
    case DropReason::kRingFull: return "the ring was full";
    case DropReason::kInvalid: return "the producer refused the record's content";
    case DropReason::kNoRing: return "threads that found every ring taken";
    case DropReason::kCorrupt: return "the ring failed validation and was quarantined";
    case DropReason::kVfork: return "a vfork child emitted before exec";
    case DropReason::kReentrant:
      return "a signal handler emitted while its thread was inside a record write";
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
  ++thread_of(e.pid, e.tid).records;
  ++records_;
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
    names.push_back({{"name", r.name}, {"count", r.count}, {"total_ns", r.total_ns},
                     {"mean_ns", r.mean_ns}, {"p50_ns", r.p50_ns}, {"p99_ns", r.p99_ns},
                     {"max_ns", r.max_ns}, {"device_clock", r.device}});
  j["names"] = names;
  json procs = json::array();
  for (const auto& [pid, p] : procs_) {
    json pj{{"pid", pid}, {"cmdline", shown(p.cmdline)}};
    pj["anchor"] = p.anchored ? json{{"mono_ns", p.mono_ns}, {"wall_ns", p.wall_ns}} : json();
    uint64_t rec = 0, drop = 0, unf = 0;
    json tj = json::array();
    for (const auto& [tid, t] : p.threads) {
      tj.push_back({{"tid", tid}, {"name", shown(t.name)}, {"records", t.records},
                    {"dropped", t.dropped}, {"unfinished", t.unfinished}});
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
  if (result.status == ReadResult::Status::kCut)
    o += "CUT: " + result.message + "\n";
  for (const std::string& n : result.notes) o += "note: " + n + "\n";
  uint64_t processes = 0, threads = 0;
  for (const auto& [pid, p] : procs_) {
    if (pid == 0) continue;
    ++processes;
    threads += p.threads.size();
  }
  o += "records: " + std::to_string(records_) + " in " + std::to_string(processes) +
       " process(es), " + std::to_string(threads) + " thread(s); dropped: " +
       std::to_string(dropped_) + "; unfinished: " + std::to_string(unfinished_count_) + "\n";
  if (records_ == 0) o += "no records: the trace holds no span\n";

  const std::vector<Row> table = rows();
  if (!table.empty()) {
    size_t w = 9;
    for (const Row& r : table) w = std::max(w, r.name.size() + (r.device ? 6 : 0));
    o += "\n" + pad("span name", w, false) + pad("count", 10, true) + pad("total us", 16, true) +
         pad("mean us", 14, true) + pad("p50 us", 14, true) + pad("p99 us", 14, true) +
         pad("max us", 14, true) + "\n";
    for (const Row& r : table) {
      o += pad(r.name + (r.device ? " (dev)" : ""), w, false) +
           pad(std::to_string(r.count), 10, true) + pad(us(r.total_ns), 16, true) +
           pad(us(static_cast<uint64_t>(r.mean_ns + 0.5)), 14, true) +
           pad(us(r.p50_ns), 14, true) + pad(us(r.p99_ns), 14, true) +
           pad(us(r.max_ns), 14, true) + "\n";
    }
    if (std::any_of(table.begin(), table.end(), [](const Row& r) { return r.device; }))
      o += "(dev): clk=dev spans, durations in device-clock ns\n";
  }

  if (!procs_.empty()) {
    o += "\n" + pad("pid", 10, false) + pad("tid", 10, false) + pad("thread", 18, false) +
         pad("records", 10, true) + pad("dropped", 10, true) + pad("unfinished", 12, true) +
         "\n";
    for (const auto& [pid, p] : procs_) {
      uint64_t rec = 0, drop = 0, unf = 0;
      for (const auto& [tid, t] : p.threads) {
        rec += t.records;
        drop += t.dropped;
        unf += t.unfinished;
      }
      const std::string what =
          pid == 0 ? "(records lost outside any thread)" : shown(p.cmdline).substr(0, 100);
      o += pad(std::to_string(pid), 10, false) + pad("", 10, false) + pad("", 18, false) +
           pad(std::to_string(rec), 10, true) + pad(std::to_string(drop), 10, true) +
           pad(std::to_string(unf), 12, true) + "  " + what + "\n";
      if (pid == 0) continue;
      for (const auto& [tid, t] : p.threads)
        o += pad("", 10, false) + pad(std::to_string(tid), 10, false) +
             pad(shown(t.name), 18, false) + pad(std::to_string(t.records), 10, true) +
             pad(std::to_string(t.dropped), 10, true) + pad(std::to_string(t.unfinished), 12, true) +
             "\n";
    }
  }

  if (!drops_.empty()) {
    o += "\ndrops (records that are not in the trace):\n";
    for (const Drop& d : drops_) {
      o += "  pid " + std::to_string(d.pid) + " tid " + std::to_string(d.tid) + ": " +
           std::to_string(d.dropped) + " record(s)";
      if (d.reason != DropReason::kNoRing && d.reason != DropReason::kVfork)
        o += ", seq " + std::to_string(d.first_seq) + ".." + std::to_string(d.last_seq);
      o += ", reason " + std::string(drop_reason_name(d.reason)) + " (" + reason_note(d.reason) +
           ")\n";
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
        o += u.name + " (depth " + std::to_string(u.depth) + ", inv " + std::to_string(u.inv) +
             "), started at ts=" + std::to_string(u.ts_ns) + "\n";
    }
  }
  return o;
}

int run_report(TraceInput& in, TraceOutput& out, bool json, std::string* err) {
  TraceReport report;
  const ReadResult r = read_trace(in, report);
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
