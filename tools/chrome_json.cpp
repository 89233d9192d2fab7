#include "tools/chrome_json.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace spanring {
namespace {

uint64_t lane_key(uint32_t chrome_pid, uint32_t tid) {
  return (uint64_t{chrome_pid} << 32) | tid;
}

void append_dec(std::string& o, uint64_t v) {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  o.append(buf, static_cast<size_t>(n));
}

// ns as µs with exactly three decimals: exact, whatever the magnitude (a double would round
// ts of a machine up for months).
void append_us(std::string& o, uint64_t ns) {
  append_dec(o, ns / 1000);
  char buf[5];
  std::snprintf(buf, sizeof buf, ".%03u", static_cast<unsigned>(ns % 1000));
  o += buf;
}

// Length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  const size_t left = s.size() - i;
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xbf) {
    return k < left && b(k) >= lo && b(k) <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// True when `v` is what [STRACE] consumers read as an integer: digits, optionally after one
// '-'; *out is its JSON spelling (no leading zeros) when it fits 64 bits.
bool integer_value(std::string_view v, std::string* out) {
  const bool neg = !v.empty() && v[0] == '-';
  const std::string_view digits = v.substr(neg ? 1 : 0);
  if (digits.empty() || digits.size() > 20) return false;
  uint64_t x = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
  }
  if (neg && x > uint64_t{INT64_MAX} + 1) return false;
  out->clear();
  if (neg && x != 0) *out += '-';
  append_dec(*out, x);
  return true;
}

// `args` of an X event: the record fields, then every attribute token in order. A key seen
// twice gets "#2", "#3"... (JSON objects should not repeat keys).
void append_args(std::string& o, const SpanEvent& s, std::string_view attrs) {
  o += "{\"inv\":";
  append_dec(o, s.inv);
  o += ",\"hid\":\"";
  char hid[20];
  std::snprintf(hid, sizeof hid, "%llx", static_cast<unsigned long long>(s.hid));
  o += hid;
  o += "\",\"depth\":";
  append_dec(o, s.depth);
  std::vector<std::string_view> keys{"inv", "hid", "depth"};
  std::string num;
  std::string_view rest = attrs;
  while (!rest.empty()) {
    const size_t sp = rest.find(' ');
    const std::string_view tok = rest.substr(0, sp);
    rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
    if (tok.empty()) continue;
    const size_t eq = tok.find('=');
    const std::string_view key = tok.substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view{} : tok.substr(eq + 1);
    const size_t seen = static_cast<size_t>(std::count(keys.begin(), keys.end(), key));
    keys.push_back(key);
    o += ',';
    if (seen == 0) {
      append_json_string(o, key);
    } else {
      append_json_string(o, std::string(key) + "#" + std::to_string(seen + 1));
    }
    o += ':';
    if (integer_value(val, &num)) o += num;
    else append_json_string(o, val);
  }
  o += '}';
}

// The value of the first `key=value` token in encoded attributes; false when there is none.
bool find_attr(std::string_view attrs, std::string_view key, std::string_view* value) noexcept {
  while (!attrs.empty()) {
    const size_t sp = attrs.find(' ');
    const std::string_view tok = attrs.substr(0, sp);
    if (tok.size() > key.size() && tok.substr(0, key.size()) == key && tok[key.size()] == '=') {
      *value = tok.substr(key.size() + 1);
      return true;
    }
    if (sp == std::string_view::npos) break;
    attrs.remove_prefix(sp + 1);
  }
  return false;
}

// A process' label from its command line: the program's file name and its arguments.
std::string cmdline_label(std::string_view cmdline) {
  std::string label;
  size_t at = 0;
  bool first = true;
  while (at <= cmdline.size()) {
    size_t nul = cmdline.find('\0', at);
    if (nul == std::string_view::npos) nul = cmdline.size();
    std::string_view arg = cmdline.substr(at, nul - at);
    if (first) {
      const size_t slash = arg.rfind('/');
      if (slash != std::string_view::npos) arg.remove_prefix(slash + 1);
      first = false;
    } else {
      label += ' ';
    }
    label.append(arg);
    at = nul + 1;
  }
  // Long enough to tell runs apart, short enough for a track title.
  constexpr size_t kMaxLabel = 120;
  if (label.size() > kMaxLabel) {
    label.resize(kMaxLabel);
    label += "...";
  }
  return label;
}

std::string joined_cmdline(std::string_view cmdline) {
  std::string s(cmdline);
  std::replace(s.begin(), s.end(), '\0', ' ');
  return s;
}

}  // namespace

// Hand-written rather than nlohmann::json(s).dump(-1, ' ', false, error_handler_t::replace),
// because that changes the output bytes for valid input. Measured with nlohmann-json 3.11.2
// (Debian) on 100,000 random strings: identical for the 13,892 valid UTF-8 ones without control
// bytes (so for every encoded name and attribute, printable ASCII), but it writes
// \b \f \r as short escapes (here \u0008 \u000c \u000d), DEL raw (here \u007f) and an invalid
// byte as the raw bytes EF BF BD (here the escape \ufffd). Command lines and thread names are
// arbitrary bytes, so a trace holding those would convert differently from before; with
// ensure_ascii the valid UTF-8 (é) changes instead.
void append_json_string(std::string& o, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  o += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '"') o += "\\\"";
      else if (c == '\\') o += "\\\\";
      else if (c == '\n') o += "\\n";
      else if (c == '\t') o += "\\t";
      else if (c < 0x20 || c == 0x7f) {
        o += "\\u00";
        o += kHex[c >> 4];
        o += kHex[c & 15];
      } else {
        o += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t n = utf8_len(s, i);
    if (n == 0) {
      o += "\\ufffd";
      ++i;
    } else {
      o.append(s.substr(i, n));
      i += n;
    }
  }
  o += '"';
}

ChromeTraceWriter::ChromeTraceWriter(TraceOutput& out, std::string source)
    : out_(out), source_(std::move(source)) {
  out_.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
}

void ChromeTraceWriter::begin_event() {
  ev_.clear();
  if (!first_) ev_ += ",\n";
  first_ = false;
}

void ChromeTraceWriter::name_process(uint32_t pid) {
  Process& p = procs_[pid];
  p.named = true;
  begin_event();
  ev_ += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
  append_dec(ev_, pid);
  ev_ += ",\"tid\":0,\"args\":{\"name\":";
  if (pid == kLostPid) {
    append_json_string(ev_, "spanring: records lost outside any thread (no_ring, vfork)");
  } else {
    append_json_string(ev_, p.label.empty() ? "pid " + std::to_string(pid) : p.label);
  }
  if (p.anchored) {
    ev_ += ",\"anchor_mono_ns\":";
    append_dec(ev_, p.mono_ns);
    ev_ += ",\"anchor_wall_ns\":";
    append_dec(ev_, p.wall_ns);
  }
  ev_ += "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
  append_dec(ev_, pid);
  ev_ += ",\"tid\":0,\"args\":{\"sort_index\":";
  append_dec(ev_, pid);
  ev_ += "}}";
  out_.write(ev_);
}

void ChromeTraceWriter::name_device_process(uint32_t pid) {
  Process& p = procs_[pid];
  p.device_named = true;
  const uint32_t dpid = kDevicePidBase + pid;
  begin_event();
  ev_ += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
  append_dec(ev_, dpid);
  ev_ += ",\"tid\":0,\"args\":{\"name\":";
  append_json_string(ev_, "device clock of pid " + std::to_string(pid) +
                              (p.label.empty() ? "" : " (" + p.label + ")"));
  ev_ += ",\"clock\":\"clk=dev: ts is a device-clock offset, not host time\"}},\n"
         "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":";
  append_dec(ev_, dpid);
  ev_ += ",\"tid\":0,\"args\":{\"sort_index\":";
  append_dec(ev_, dpid);
  ev_ += "}}";
  out_.write(ev_);
}

void ChromeTraceWriter::name_lane(uint32_t chrome_pid, uint32_t tid, uint32_t host_pid,
                                  bool device) {
  if (!device && !procs_[host_pid].named) name_process(host_pid);
  if (device && !procs_[host_pid].device_named) name_device_process(host_pid);
  Lane& lane = lanes_[lane_key(chrome_pid, tid)];
  if (lane.named) return;
  lane.named = true;
  std::string name;
  if (chrome_pid == kLostPid) {
    name = "lost records";
  } else {
    const Lane& host = lanes_[lane_key(host_pid, tid)];
    name = !host.name.empty() ? host.name : tid == host_pid ? "main" : "thread";
    if (device) name += " (device clock)";
  }
  begin_event();
  ev_ += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":";
  append_dec(ev_, chrome_pid);
  ev_ += ",\"tid\":";
  append_dec(ev_, tid);
  ev_ += ",\"args\":{\"name\":";
  append_json_string(ev_, name);
  ev_ += "}}";
  out_.write(ev_);
}

void ChromeTraceWriter::process(const ProcessEvent& e) {
  const uint32_t pid = e.pid;
  const std::string_view cmdline = e.cmdline;
  Process& p = procs_[pid];
  p.anchored = true;
  p.mono_ns = e.mono_ns;
  p.wall_ns = e.wall_ns;
  if (!cmdline.empty()) p.label = cmdline_label(cmdline);
  name_process(pid);  // again, if a span came first: the later name wins in viewers
  if (!cmdline.empty()) {
    begin_event();
    ev_ += "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":";
    append_dec(ev_, pid);
    ev_ += ",\"tid\":0,\"args\":{\"labels\":";
    append_json_string(ev_, joined_cmdline(cmdline));
    ev_ += "}}";
    out_.write(ev_);
  }
}

void ChromeTraceWriter::thread(const ThreadEvent& e) {
  Lane& lane = lanes_[lane_key(e.pid, e.tid)];
  lane.name = std::string(e.name);
  lane.named = false;  // (re)name it with its own name
  name_lane(e.pid, e.tid, e.pid, false);
}

void ChromeTraceWriter::instant(uint32_t chrome_pid, uint32_t tid, uint64_t ts_ns,
                                const std::string& name, const std::string& args) {
  begin_event();
  ev_ += "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"spanring\",\"name\":";
  append_json_string(ev_, name);
  ev_ += ",\"pid\":";
  append_dec(ev_, chrome_pid);
  ev_ += ",\"tid\":";
  append_dec(ev_, tid);
  ev_ += ",\"ts\":";
  append_us(ev_, ts_ns);
  ev_ += ",\"args\":";
  ev_ += args;
  ev_ += '}';
  out_.write(ev_);
}

void ChromeTraceWriter::place_pending(uint32_t pid, uint32_t tid, uint64_t ts_ns) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->pid == pid && it->tid == tid) {
      instant(pid, tid, ts_ns, it->name, it->args);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void ChromeTraceWriter::span(const SpanEvent& e) {
  const EventSpelling::Span sp = spelling_.span(e);
  const uint32_t cpid = sp.device ? kDevicePidBase + e.pid : e.pid;
  name_lane(cpid, e.tid, e.pid, sp.device);
  begin_event();
  ev_ += "{\"ph\":\"X\",\"cat\":\"";
  ev_ += sp.device ? "device" : "host";
  ev_ += "\",\"name\":";
  append_json_string(ev_, sp.name);
  ev_ += ",\"pid\":";
  append_dec(ev_, cpid);
  ev_ += ",\"tid\":";
  append_dec(ev_, e.tid);
  ev_ += ",\"ts\":";
  append_us(ev_, e.ts_ns);
  ev_ += ",\"dur\":";
  append_us(ev_, e.dur_ns);
  ev_ += ",\"args\":";
  append_args(ev_, e, sp.attrs);
  ev_ += '}';
  out_.write(ev_);
  if (sp.device) return;
  Lane& lane = lanes_[lane_key(e.pid, e.tid)];
  if (!lane.has_end && !pending_.empty()) place_pending(e.pid, e.tid, e.ts_ns);
  const uint64_t end = e.ts_ns + e.dur_ns < e.ts_ns ? UINT64_MAX : e.ts_ns + e.dur_ns;
  lane.has_end = true;
  lane.last_end = end;
  if (!has_host_end_ || end > max_host_end_) max_host_end_ = end;
  has_host_end_ = true;
  flow(e, sp);
}

void ChromeTraceWriter::flow(const SpanEvent& e, const EventSpelling::Span& sp) {
  static constexpr std::string_view kSubmit = "submit";
  static constexpr std::string_view kDispatch = "dispatch";
  const bool submit = sp.name.size() > kSubmit.size() &&
                      sp.name.substr(sp.name.size() - kSubmit.size()) == kSubmit &&
                      sp.name[sp.name.size() - kSubmit.size() - 1] == '.';
  const bool dispatch = !submit && sp.name.size() > kDispatch.size() &&
                        sp.name.substr(sp.name.size() - kDispatch.size()) == kDispatch &&
                        sp.name[sp.name.size() - kDispatch.size() - 1] == '.';
  if (!submit && !dispatch) return;
  std::string_view run_id, task_slot;
  if (!find_attr(sp.attrs, "run_id", &run_id) || !find_attr(sp.attrs, "task_slot", &task_slot))
    return;
  const std::string_view prefix =
      sp.name.substr(0, sp.name.size() - (submit ? kSubmit.size() : kDispatch.size()));
  std::string key = std::to_string(e.pid);
  key += ' ';
  key.append(prefix);
  key += ' ';
  key.append(run_id);
  key += ' ';
  key.append(task_slot);
  // Bound to the slice that encloses the middle of each span (Perfetto and Catapult bind a
  // flow end to the slice open on its thread at its ts).
  const FlowEnd here{e.pid, e.tid, e.ts_ns + e.dur_ns / 2};
  auto& mine = submit ? submits_[key] : dispatches_[key];
  auto& theirs = submit ? dispatches_[key] : submits_[key];
  if (theirs.empty()) {
    mine.push_back(here);
    return;
  }
  const FlowEnd other = theirs.front();
  theirs.pop_front();
  const FlowEnd& from = submit ? here : other;
  const FlowEnd& to = submit ? other : here;
  const uint64_t id = ++flow_id_;
  std::string name(prefix);
  name += "submit->";
  name.append(prefix);
  name += "dispatch";
  for (int end = 0; end < 2; ++end) {
    const FlowEnd& f = end == 0 ? from : to;
    begin_event();
    ev_ += end == 0 ? "{\"ph\":\"s\"" : "{\"ph\":\"f\",\"bp\":\"e\"";
    ev_ += ",\"cat\":\"flow\",\"name\":";
    append_json_string(ev_, name);
    ev_ += ",\"id\":";
    append_dec(ev_, id);
    ev_ += ",\"pid\":";
    append_dec(ev_, f.pid);
    ev_ += ",\"tid\":";
    append_dec(ev_, f.tid);
    ev_ += ",\"ts\":";
    append_us(ev_, f.at_ns);
    ev_ += '}';
    out_.write(ev_);
  }
  ++flows_;
}

void ChromeTraceWriter::drops(const DropsEvent& e) {
  const uint32_t pid = e.pid;
  const uint32_t tid = e.tid;
  std::string args = "{\"dropped\":";
  append_dec(args, e.dropped);
  args += ",\"first_seq\":";
  append_dec(args, e.first_seq);
  args += ",\"last_seq\":";
  append_dec(args, e.last_seq);
  args += ",\"reason\":\"";
  args += drop_reason_name(e.reason);
  args += "\"}";
  const std::string name =
      "dropped " + std::to_string(e.dropped) + " (" + drop_reason_name(e.reason) + ")";
  if (pid == 0 && tid == 0) {
    pending_.push_back(Pending{kLostPid, 0, name, args});
    return;
  }
  name_lane(pid, tid, pid, false);
  const Lane& lane = lanes_[lane_key(pid, tid)];
  if (lane.has_end) instant(pid, tid, lane.last_end, name, args);
  else pending_.push_back(Pending{pid, tid, name, args});
}

void ChromeTraceWriter::unfinished(const UnfinishedEvent& e) {
  const std::string_view name = spelling_.unfinished_name(e);
  name_lane(e.pid, e.tid, e.pid, false);
  std::string args = "{\"inv\":";
  append_dec(args, e.inv);
  args += ",\"depth\":";
  append_dec(args, e.depth);
  args += ",\"name\":";
  append_json_string(args, name);
  args += ",\"reason\":\"owner_died\"}";
  instant(e.pid, e.tid, e.ts_ns, "unfinished: " + std::string(name), args);
}

void ChromeTraceWriter::undescribed(const UndescribedEvent& e) {
  const uint32_t pid = e.pid;
  const uint32_t tid = e.tid;
  const uint64_t count = e.count;
  name_lane(pid, tid, pid, false);
  std::string args = "{\"undescribed\":";
  append_dec(args, count);
  args += ",\"reason\":\"owner_died\"}";
  const std::string name = "unfinished: " + std::to_string(count) + " spans nested too deep";
  const Lane& lane = lanes_[lane_key(pid, tid)];
  if (lane.has_end) instant(pid, tid, lane.last_end, name, args);
  else pending_.push_back(Pending{pid, tid, name, args});
}

void ChromeTraceWriter::finish(const ReadResult& result) {
  // What is still waiting for a time goes to the end of the trace (or its lane's anchor).
  for (const Pending& p : pending_) {
    uint64_t at = has_host_end_ ? max_host_end_ : 0;
    auto it = procs_.find(p.pid);
    if (!has_host_end_ && it != procs_.end() && it->second.anchored) at = it->second.mono_ns;
    if (p.pid == kLostPid) name_lane(kLostPid, 0, kLostPid, false);
    instant(p.pid, p.tid, at, p.name, p.args);
  }
  pending_.clear();
  std::string o = "\n],\n\"otherData\":{\"source\":";
  append_json_string(o, source_ + " (" + result.format + ")");
  o += ",\"converter\":\"spanring convert --to chrome\",\"clock\":";
  append_json_string(o,
                     "ts and dur are CLOCK_MONOTONIC microseconds; wall-clock ns of a host span "
                     "of pid P = anchor_wall_ns + (ts * 1000 - anchor_mono_ns) with P's "
                     "clock_anchor below (for ts*1000 >= anchor_mono_ns). Device spans "
                     "(clk=dev, processes 'device clock of pid P') are device-clock offsets "
                     "and have no wall-clock time.");
  o += ",\"flows\":";
  append_json_string(o, std::to_string(flows_) + " submit->dispatch arrows");
  for (const auto& [pid, p] : procs_) {
    if (!p.anchored) continue;
    o += ",\"clock_anchor_";
    append_dec(o, pid);
    o += "\":\"mono_ns=";
    append_dec(o, p.mono_ns);
    o += " wall_ns=";
    append_dec(o, p.wall_ns);
    o += '"';
  }
  if (result.status != ReadResult::Status::kComplete) {
    o += ",\"input_problem\":";
    append_json_string(o, result.message);
  }
  o += "}}\n";
  out_.write(o);
}

}  // namespace spanring
