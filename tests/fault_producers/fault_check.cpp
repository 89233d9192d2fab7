// See fault_check.h.
#include "fault_check.h"

#include <doctest/doctest.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace fault {
namespace {

using spanring_test::LineKind;
using spanring_test::ParseResult;

constexpr std::string_view kUnfinishedMarker = "[SPANRING_UNFINISHED] ";
constexpr size_t kKeptErrors = 20;

// Reads `key=<unsigned decimal>` followed by `end` (a space, or LF for the last field).
bool read_u64(std::string_view line, size_t& pos, std::string_view key, char end, uint64_t* v,
              std::string* error) {
  const std::string want = std::string(key) + "=";
  if (line.compare(pos, want.size(), want) != 0) {
    *error = "byte " + std::to_string(pos) + ": expected '" + want + "'";
    return false;
  }
  pos += want.size();
  const size_t start = pos;
  while (pos < line.size() && line[pos] >= '0' && line[pos] <= '9') ++pos;
  if (pos == start) {
    *error = "byte " + std::to_string(start) + ": " + std::string(key) + " is not a number";
    return false;
  }
  const auto [p, ec] = std::from_chars(line.data() + start, line.data() + pos, *v);
  if (ec != std::errc() || p != line.data() + pos) {
    *error = "byte " + std::to_string(start) + ": " + std::string(key) + " overflows 64 bits";
    return false;
  }
  if (pos >= line.size() || line[pos] != end) {
    *error = "byte " + std::to_string(pos) + ": expected " + (end == ' ' ? "a space" : "LF") +
             " after " + std::string(key);
    return false;
  }
  ++pos;
  return true;
}

// `key=<token>` up to `end`.
bool read_token(std::string_view line, size_t& pos, std::string_view key, char end,
                std::string* out, std::string* error) {
  const std::string want = std::string(key) + "=";
  if (line.compare(pos, want.size(), want) != 0) {
    *error = "byte " + std::to_string(pos) + ": expected '" + want + "'";
    return false;
  }
  pos += want.size();
  const size_t stop = line.find(end, pos);
  if (stop == std::string_view::npos) {
    *error = "byte " + std::to_string(pos) + ": " + std::string(key) + " is not terminated";
    return false;
  }
  *out = std::string(line.substr(pos, stop - pos));
  pos = stop + 1;
  return true;
}

bool is_segment_wide(const DropsLine& d) { return d.pid == 0 && d.tid == 0; }

}  // namespace

std::optional<UnfinishedLine> parse_unfinished(std::string_view line, std::string* error) {
  UnfinishedLine u;
  if (line.size() > 511) {
    *error = "longer than 511 bytes";
    return std::nullopt;
  }
  if (line.empty() || line.back() != '\n' || line.find('\n') != line.size() - 1) {
    *error = "not exactly one LF, at the end";
    return std::nullopt;
  }
  if (line.substr(0, kUnfinishedMarker.size()) != kUnfinishedMarker) {
    *error = "does not start with '[SPANRING_UNFINISHED] '";
    return std::nullopt;
  }
  size_t pos = kUnfinishedMarker.size();
  if (line.compare(pos, 4, "v=1 ") != 0) {
    *error = "byte " + std::to_string(pos) + ": expected 'v=1 '";
    return std::nullopt;
  }
  pos += 4;
  if (!read_u64(line, pos, "pid", ' ', &u.pid, error) ||
      !read_u64(line, pos, "tid", ' ', &u.tid, error))
    return std::nullopt;
  if (line.compare(pos, 12, "undescribed=") == 0) {
    u.described = false;
    if (!read_u64(line, pos, "undescribed", ' ', &u.undescribed, error) ||
        !read_token(line, pos, "reason", '\n', &u.reason, error))
      return std::nullopt;
  } else {
    if (!read_u64(line, pos, "inv", ' ', &u.inv, error) ||
        !read_u64(line, pos, "depth", ' ', &u.depth, error) ||
        !read_token(line, pos, "name", ' ', &u.name, error) ||
        !read_u64(line, pos, "ts", ' ', &u.ts, error) ||
        !read_token(line, pos, "reason", '\n', &u.reason, error))
      return std::nullopt;
    const std::string bad = spanring_test::check_name_field(u.name);
    if (!bad.empty()) {
      *error = "name: " + bad;
      return std::nullopt;
    }
  }
  if (pos != line.size()) {
    *error = "byte " + std::to_string(pos) + ": trailing bytes";
    return std::nullopt;
  }
  if (u.reason.empty() || u.reason.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") !=
                              std::string::npos) {
    *error = "reason '" + u.reason + "' is not [a-z0-9_]+";
    return std::nullopt;
  }
  return u;
}

uint64_t TraceFacts::dropped_total() const {
  uint64_t n = 0;
  for (const DropsLine& d : drops) n += d.dropped;
  return n;
}

uint64_t TraceFacts::dropped_with_reason(const std::string& reason) const {
  uint64_t n = 0;
  for (const DropsLine& d : drops) n += d.reason == reason ? d.dropped : 0;
  return n;
}

uint64_t TraceFacts::drop_lines_with_reason(const std::string& reason) const {
  uint64_t n = 0;
  for (const DropsLine& d : drops) n += d.reason == reason ? 1 : 0;
  return n;
}

std::map<Owner, uint64_t> TraceFacts::dropped_by_owner() const {
  std::map<Owner, uint64_t> m;
  for (const DropsLine& d : drops) {
    if (!is_segment_wide(d)) m[{d.pid, d.tid}] += d.dropped;
  }
  return m;
}

uint64_t TraceFacts::unfinished_total() const {
  uint64_t n = 0;
  for (const UnfinishedLine& u : unfinished) n += u.described ? 1 : u.undescribed;
  return n;
}

uint64_t TraceFacts::spans(const std::string& name) const {
  const auto it = spans_by_name.find(name);
  return it == spans_by_name.end() ? 0 : it->second;
}

TraceFacts scan_text(std::string_view text, const SpanFn& on_span) {
  TraceFacts f;
  std::map<uint64_t, uint64_t> anchor_mono;  // pid -> mono_ns
  const auto error = [&f](uint64_t line_no, const std::string& why, std::string_view line) {
    if (f.error_count++ < kKeptErrors) {
      f.errors.push_back("line " + std::to_string(line_no) + ": " + why + "  [" +
                         spanring_test::printable(line) + "]");
    }
  };
  const auto order_problem = [&f](const std::string& what) {
    if (f.order_problems.size() < kKeptErrors) f.order_problems.push_back(what);
  };
  size_t pos = 0;
  while (pos < text.size()) {
    const uint64_t line_no = ++f.lines;
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    const std::string_view line = text.substr(pos, end - pos);
    pos = end;
    if (line.substr(0, kUnfinishedMarker.size()) == kUnfinishedMarker) {
      std::string why;
      auto u = parse_unfinished(line, &why);
      if (!u) {
        error(line_no, why, line);
      } else {
        f.unfinished.push_back(std::move(*u));
      }
      continue;
    }
    const ParseResult r = spanring_test::parse_line(line);
    if (!r.ok()) {
      error(line_no, r.error, line);
      continue;
    }
    switch (r.line.kind) {
      case LineKind::kSpan: {
        const SpanLine& s = r.line.span;
        ++f.span_lines;
        ++f.spans_by_name[s.name];
        ++f.spans_by_owner[{s.pid, s.tid}];
        f.first_name_of_pid.emplace(s.pid, s.name);
        const auto a = anchor_mono.find(s.pid);
        const bool device = spanring_test::is_device_span(s);
        if (a == anchor_mono.end()) {
          order_problem("line " + std::to_string(line_no) + ": span " + s.name + " of pid " +
                        std::to_string(s.pid) + " before any [CLOCK_ANCHOR] of that pid");
        } else if (!device && s.ts < a->second) {
          order_problem("line " + std::to_string(line_no) + ": span " + s.name + " ts " +
                        std::to_string(s.ts) + " < its pid's anchor mono_ns " +
                        std::to_string(a->second));
        }
        if (s.prefix.present && !device && s.prefix.mono_ns != s.ts + s.dur) {
          order_problem("line " + std::to_string(line_no) + ": prefix mono_ns " +
                        std::to_string(s.prefix.mono_ns) + " != ts + dur " +
                        std::to_string(s.ts + s.dur));
        }
        if (on_span) on_span(s, line_no);
        break;
      }
      case LineKind::kAnchor:
        if (!anchor_mono.emplace(r.line.anchor.pid, r.line.anchor.mono_ns).second) {
          order_problem("line " + std::to_string(line_no) + ": a second [CLOCK_ANCHOR] for pid " +
                        std::to_string(r.line.anchor.pid));
        }
        f.anchors.push_back(r.line.anchor);
        break;
      case LineKind::kDrops:
        f.drops.push_back(r.line.drops);
        break;
      case LineKind::kOther:
        error(line_no, "not a [STRACE], [CLOCK_ANCHOR], [SPANRING_DROPS] or "
                       "[SPANRING_UNFINISHED] line", line);
        break;
    }
  }
  return f;
}

TraceFacts scan_trace(const std::string& path, const SpanFn& on_span) {
  const std::string text = spanring_test::read_file(path);
  return scan_text(text, on_span);
}

std::vector<std::string> invariant_problems(const TraceFacts& f, const Summary& summary,
                                            const std::string& stderr_text,
                                            const std::string& out_path) {
  std::vector<std::string> p;
  if (f.error_count != 0) {
    p.push_back(std::to_string(f.error_count) + " line(s) of " + out_path + " do not parse:");
    for (const std::string& e : f.errors) p.push_back("  " + e);
  }
  for (const std::string& o : f.order_problems) p.push_back(o);

  std::set<uint64_t> pids;
  std::set<Owner> owners;
  for (const auto& [owner, n] : f.spans_by_owner) {
    pids.insert(owner.first);
    owners.insert(owner);
  }
  std::set<uint64_t> pids_with_drops;
  for (const DropsLine& d : f.drops) {
    if (is_segment_wide(d)) {
      if (d.first_seq != 0 || d.last_seq != 0) {
        p.push_back("segment-wide drop line (pid=0 tid=0, reason=" + d.reason +
                    ") with first_seq=" + std::to_string(d.first_seq) +
                    " last_seq=" + std::to_string(d.last_seq));
      }
      if (d.reason != "no_ring" && d.reason != "vfork") {
        p.push_back("drop line with pid=0 tid=0 and reason=" + d.reason +
                    ": only no_ring and vfork are segment-wide");
      }
      continue;
    }
    if (d.pid == 0 || d.tid == 0) {
      p.push_back("drop line with pid=" + std::to_string(d.pid) + " tid=" +
                  std::to_string(d.tid) + " (reason=" + d.reason + ")");
    }
    if (d.dropped == 0) p.push_back("drop line of pid " + std::to_string(d.pid) + " with dropped=0");
    if (d.last_seq < d.first_seq || d.last_seq - d.first_seq + 1 != d.dropped) {
      p.push_back("drop line of pid " + std::to_string(d.pid) + " tid " + std::to_string(d.tid) +
                  ": dropped=" + std::to_string(d.dropped) + " but seq range " +
                  std::to_string(d.first_seq) + ".." + std::to_string(d.last_seq));
    }
    pids.insert(d.pid);
    pids_with_drops.insert(d.pid);
    owners.emplace(d.pid, d.tid);
  }
  for (const UnfinishedLine& u : f.unfinished) {
    pids.insert(u.pid);
    owners.emplace(u.pid, u.tid);
  }
  std::set<uint64_t> anchored;
  for (const AnchorLine& a : f.anchors) {
    anchored.insert(a.pid);
    bool has_span = false;
    for (const auto& [owner, n] : f.spans_by_owner) has_span |= owner.first == a.pid;
    if (!has_span && pids_with_drops.count(a.pid) == 0) {
      p.push_back("[CLOCK_ANCHOR] for pid " + std::to_string(a.pid) +
                  ", which has neither spans nor drops");
    }
  }

  if (summary.written != f.span_lines) {
    p.push_back("summary written=" + std::to_string(summary.written) + " but the file holds " +
                std::to_string(f.span_lines) + " [STRACE] lines");
  }
  if (summary.dropped != f.dropped_total()) {
    p.push_back("summary dropped=" + std::to_string(summary.dropped) +
                " but the drop lines add up to " + std::to_string(f.dropped_total()));
  }
  if (summary.unfinished != f.unfinished_total()) {
    p.push_back("summary unfinished=" + std::to_string(summary.unfinished) + " but the file has " +
                std::to_string(f.unfinished_total()) + " unfinished span(s) on " +
                std::to_string(f.unfinished.size()) + " [SPANRING_UNFINISHED] line(s)");
  }
  if (summary.processes != pids.size()) {
    p.push_back("summary processes=" + std::to_string(summary.processes) + " but the file has " +
                std::to_string(pids.size()) + " distinct pids with records, drops or unfinished spans");
  }
  // threads= counts ring owners (docs/output.md): a reused tid is a new owner, so the file's
  // distinct (pid, tid) are a lower bound.
  if (summary.threads < owners.size()) {
    p.push_back("summary threads=" + std::to_string(summary.threads) + " but the file has " +
                std::to_string(owners.size()) + " distinct (pid, tid)");
  }
  const auto wrote = spanring_test::parse_wrote(stderr_text);
  if (!wrote) {
    p.push_back("no single 'spanring: wrote N records to PATH' line on stderr");
  } else {
    if (wrote->first != f.span_lines) {
      p.push_back("'wrote " + std::to_string(wrote->first) + " records' but the file holds " +
                  std::to_string(f.span_lines));
    }
    if (wrote->second != out_path) {
      p.push_back("'wrote ... to " + wrote->second + "' but -o was " + out_path);
    }
  }
  return p;
}

std::string describe(const std::vector<std::string>& problems, size_t max) {
  std::string s;
  for (size_t i = 0; i < problems.size() && i < max; ++i) s += problems[i] + "\n";
  if (problems.size() > max) s += "... and " + std::to_string(problems.size() - max) + " more\n";
  return s;
}

std::optional<uint64_t> spanring_pid(const std::string& stderr_text) {
  const std::optional<std::string> segment = spanring_test::segment_from_stderr(stderr_text);
  constexpr std::string_view kPrefix = "spanring-";
  if (!segment || segment->rfind(kPrefix, 0) != 0) return std::nullopt;
  uint64_t pid = 0;
  const char* b = segment->data() + kPrefix.size();
  const char* e = segment->data() + segment->size();
  const auto [p, ec] = std::from_chars(b, e, pid);
  if (ec != std::errc() || p == b || p == e || *p != '-') return std::nullopt;
  return pid;
}

std::optional<uint64_t> attr_u64(const SpanLine& span, std::string_view key) {
  const auto v = spanring_test::attr_value(span.attrs, key);
  if (!v) return std::nullopt;
  uint64_t n = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || p != v->data() + v->size()) return std::nullopt;
  return n;
}

std::string spec_encode(std::string_view raw, bool is_name, bool went_on) {
  const size_t cap = is_name ? 64 : 192;
  if (const size_t nul = raw.find('\0'); nul != std::string_view::npos) {
    raw = raw.substr(0, nul);  // "Input ends at the first NUL byte."
  }
  std::string out;
  size_t last_unit = 0;
  bool cut = went_on;
  for (const char ch : raw) {
    const auto b = static_cast<unsigned char>(ch);
    const bool as_is = b >= 0x20 && b <= 0x7e && b != '%' && b != '[' && b != ']' &&
                       !(is_name && (b == ' ' || b == '='));
    char unit[4];
    if (as_is) {
      unit[0] = static_cast<char>(b);
      unit[1] = '\0';
    } else {
      std::snprintf(unit, sizeof unit, "%%%02X", b);
    }
    const size_t n = as_is ? 1 : 3;
    if (out.size() + n > cap) {  // the next whole unit does not fit under the cap
      cut = true;
      break;
    }
    out.append(unit, n);
    last_unit = n;
  }
  if (cut) {
    if (out.size() == cap) out.resize(cap - last_unit);
    out += '~';
  }
  return out;
}

}  // namespace fault
