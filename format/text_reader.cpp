// The strict [STRACE] text reader (read_strace_text in format/text_reader.h). Written from the
// spec (shared/strace-format.md) and docs/output.md; it shares no code with the test suite's
// parser, so that each can check the other.
#include "format/text_reader.h"

#include <spanring/segment_layout.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

namespace spanring {
namespace {

// Lines are at most 512 bytes in spanring's output; other runtimes' log lines may be longer.
// Longer than this, a line is kept only in part (enough to see that it is no trace line).
constexpr size_t kMaxKeptLine = 64u << 10;
constexpr size_t kChunk = 1u << 20;

bool is_upper_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

// A cursor over one line; every parse step either advances or leaves `why` set.
struct Cursor {
  std::string_view s;
  size_t i = 0;
  std::string why;

  bool fail(std::string w) {
    if (why.empty()) why = std::move(w) + " at column " + std::to_string(i + 1);
    return false;
  }
  std::string show_here() const {
    std::string_view rest = s.substr(i, 16);
    if (rest.empty()) return "the end of the line";
    // Appended, not `"\"" + ... + "\""`: GCC 12's -O2 warns (-Wrestrict, a false positive in
    // char_traits::copy) on that concatenation.
    std::string quoted = "\"";
    quoted += printable_prefix(rest, 16);
    quoted += '"';
    return quoted;
  }
  bool lit(std::string_view t) {
    if (s.substr(i, t.size()) == t) {
      i += t.size();
      return true;
    }
    return fail("expected \"" + std::string(t) + "\", found " + show_here());
  }
  // Unsigned decimal, no sign, at most `max`.
  bool dec(const char* field, uint64_t* v, uint64_t max = UINT64_MAX) {
    const size_t from = i;
    uint64_t x = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      const uint64_t d = static_cast<uint64_t>(s[i] - '0');
      if (x > (UINT64_MAX - d) / 10) return fail(std::string(field) + " does not fit 64 bits");
      x = x * 10 + d;
      ++i;
    }
    if (i == from) {
      if (i < s.size() && (s[i] == '-' || s[i] == '+'))
        return fail(std::string(field) + " has a sign (numbers are unsigned decimal)");
      return fail(std::string(field) + ": expected a decimal number, found " + show_here());
    }
    if (x > max) {
      i = from;
      return fail(std::string(field) + " " + std::to_string(x) + " is larger than " +
                  std::to_string(max));
    }
    *v = x;
    return true;
  }
  // Lowercase hex, no 0x.
  bool hex(const char* field, uint64_t* v) {
    if (s.substr(i, 2) == "0x" || s.substr(i, 2) == "0X")
      return fail(std::string(field) + " has a 0x prefix (it is bare lowercase hex)");
    const size_t from = i;
    uint64_t x = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
      if (i - from == 16) return fail(std::string(field) + " has more than 16 hex digits");
      x = (x << 4) | static_cast<uint64_t>(s[i] <= '9' ? s[i] - '0' : s[i] - 'a' + 10);
      ++i;
    }
    if (i == from || (i < s.size() && s[i] >= 'A' && s[i] <= 'F'))
      return fail(std::string(field) + ": expected lowercase hex, found " + show_here());
    *v = x;
    return true;
  }
  // The bytes up to the next space (or the end of the line).
  std::string_view word() {
    const size_t from = i;
    while (i < s.size() && s[i] != ' ') ++i;
    return s.substr(from, i - from);
  }
};

// Checks an encoded name (is_name) or attribute string: 1..64 (0..192) bytes of printable ASCII
// other than % [ ] (and, in names, space and =), or %XX escapes with uppercase hex.
bool check_encoded(Cursor& c, std::string_view v, size_t from, bool is_name) {
  const char* what = is_name ? "name" : "attributes";
  const size_t cap = is_name ? kNameCap : kAttrsCap;
  if (is_name && v.empty()) {
    c.i = from;
    return c.fail("empty name");
  }
  if (v.size() > cap) {
    c.i = from;
    return c.fail(std::string(what) + " of " + std::to_string(v.size()) + " bytes (at most " +
                  std::to_string(cap) + " encoded bytes)");
  }
  for (size_t k = 0; k < v.size(); ++k) {
    const auto ch = static_cast<unsigned char>(v[k]);
    if (ch == '%') {
      if (!(k + 2 < v.size() && is_upper_hex(v[k + 1]) && is_upper_hex(v[k + 2]))) {
        c.i = from + k;
        return c.fail(std::string("'%' in ") + what +
                      " is not followed by two uppercase hex digits");
      }
      k += 2;
      continue;
    }
    const bool printable = ch >= 0x20 && ch <= 0x7e && ch != '[' && ch != ']';
    const bool grammar = is_name && (ch == ' ' || ch == '=');
    if (!printable || grammar) {
      c.i = from + k;
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", ch);
      return c.fail(std::string("byte ") + buf + " is not allowed unescaped in " + what);
    }
  }
  return true;
}

constexpr std::pair<std::string_view, DropReason> kReasons[] = {
      {"ring_full", DropReason::kRingFull}, {"invalid", DropReason::kInvalid},
      {"no_ring", DropReason::kNoRing},     {"corrupt", DropReason::kCorrupt},
      {"vfork", DropReason::kVfork},        {"reentrant", DropReason::kReentrant},
      {"max_size", DropReason::kMaxSize},   {"overwritten", DropReason::kOverwritten}};

// "ring_full, invalid, ... or overwritten": every reason the reader accepts, for its error.
std::string known_reasons() {
  std::string out;
  for (size_t i = 0; i < std::size(kReasons); ++i)
    out += std::string(i == 0 ? "" : i + 1 == std::size(kReasons) ? " or " : ", ") +
           std::string(kReasons[i].first);
  return out;
}

bool parse_reason(std::string_view r, DropReason* out) {
  for (const auto& [name, reason] : kReasons)
    if (r == name) {
      *out = reason;
      return true;
    }
  return false;
}

class TextParser {
 public:
  explicit TextParser(EventVisitor& v) : v_(v) {}

  // Parses one line (LF removed). Returns false with why() set when a trace line is malformed.
  bool line(std::string_view l, bool overlong) {
    const bool span = l.find("[STRACE]") != std::string_view::npos;
    const bool anchor = !span && l.find("[CLOCK_ANCHOR]") != std::string_view::npos;
    const bool drops = !span && !anchor && l.substr(0, 17) == "[SPANRING_DROPS] ";
    const bool unfinished = !span && !anchor && !drops && l.substr(0, 22) == "[SPANRING_UNFINISHED] ";
    if (!span && !anchor && !drops && !unfinished) {
      if (other_lines_++ == 0) first_other_ = line_no_;
      return true;
    }
    if (overlong) {
      why_ = "a trace line longer than " + std::to_string(kMaxKeptLine) + " bytes";
      return false;
    }
    Cursor c;
    c.s = l;
    const bool ok = span ? parse_span(c) : anchor ? parse_anchor(c) : drops ? parse_drops(c)
                                                                          : parse_unfinished(c);
    if (!ok) {
      const char* kind = span ? "[STRACE] record" : anchor ? "[CLOCK_ANCHOR] line"
                         : drops ? "[SPANRING_DROPS] line" : "[SPANRING_UNFINISHED] line";
      why_ = std::string(kind) + ": " + c.why;
      return false;
    }
    ++trace_lines_;
    return true;
  }
  void next_line() { ++line_no_; }
  const std::string& why() const { return why_; }
  uint64_t trace_lines() const { return trace_lines_; }
  uint64_t other_lines() const { return other_lines_; }
  uint64_t first_other() const { return first_other_; }
  uint64_t events() const { return events_; }
  std::vector<std::string>& notes() { return notes_; }

 private:
  bool parse_span(Cursor& c) {
    c.i = c.s.find("[STRACE]") + 8;
    SpanEvent s;
    uint64_t pid, tid, depth;
    if (!(c.lit(" v=1 pid=") && c.dec("pid", &pid, UINT32_MAX) && c.lit(" tid=") &&
          c.dec("tid", &tid, UINT32_MAX) && c.lit(" inv=") && c.dec("inv", &s.inv) &&
          c.lit(" hid=") && c.hex("hid", &s.hid) && c.lit(" depth=") &&
          c.dec("depth", &depth, UINT32_MAX) && c.lit(" name=")))
      return false;
    const size_t name_at = c.i;
    s.name = c.word();
    if (!check_encoded(c, s.name, name_at, true)) return false;
    if (!(c.lit(" ts=") && c.dec("ts", &s.ts_ns) && c.lit(" dur=") && c.dec("dur", &s.dur_ns)))
      return false;
    // The separating space is there even with no attributes.
    if (!c.lit(" ")) return false;
    const size_t attrs_at = c.i;
    s.attrs = c.s.substr(c.i);
    if (!check_encoded(c, s.attrs, attrs_at, false)) return false;
    s.pid = static_cast<uint32_t>(pid);
    s.tid = static_cast<uint32_t>(tid);
    s.depth = static_cast<uint32_t>(depth);
    v_.span(s);
    ++events_;
    return true;
  }

  bool parse_anchor(Cursor& c) {
    // Unlike a span, an anchor needs its whole prefix (strace-format.md).
    uint64_t e, p, pid, mono, wall;
    if (!(c.lit("[mono_ns=") && c.dec("mono_ns", &e) && c.lit("][T0x") && c.hex("thread", &p) &&
          c.lit("][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=") &&
          c.dec("pid", &pid, UINT32_MAX) && c.lit(" mono_ns=") && c.dec("mono_ns", &mono) &&
          c.lit(" wall_ns=") && c.dec("wall_ns", &wall)))
      return false;
    if (c.i != c.s.size()) return c.fail("unexpected bytes after wall_ns: " + c.show_here());
    if (!anchored_.insert(static_cast<uint32_t>(pid)).second) {
      notes_.push_back("line " + std::to_string(line_no_) + ": a second [CLOCK_ANCHOR] for pid " +
                       std::to_string(pid) + " (one per pid per file); the first is used");
      return true;
    }
    v_.process(ProcessEvent{static_cast<uint32_t>(pid), 0, mono, wall, {}});
    ++events_;
    return true;
  }

  bool parse_drops(Cursor& c) {
    uint64_t pid, tid, n, first, last;
    if (!(c.lit("[SPANRING_DROPS] v=1 pid=") && c.dec("pid", &pid, UINT32_MAX) &&
          c.lit(" tid=") && c.dec("tid", &tid, UINT32_MAX) && c.lit(" dropped=") &&
          c.dec("dropped", &n) && c.lit(" first_seq=") && c.dec("first_seq", &first) &&
          c.lit(" last_seq=") && c.dec("last_seq", &last) && c.lit(" reason=")))
      return false;
    const size_t reason_at = c.i;
    const std::string_view r = c.word();
    DropReason reason;
    if (c.i != c.s.size() || !parse_reason(r, &reason)) {
      c.i = reason_at;
      return c.fail("unknown drop reason " + c.show_here() +
                    " (" + known_reasons() + ")");
    }
    if (last < first) return c.fail("last_seq " + std::to_string(last) + " < first_seq");
    v_.drops(DropsEvent{static_cast<uint32_t>(pid), static_cast<uint32_t>(tid), n, first, last,
                        reason});
    ++events_;
    return true;
  }

  bool parse_unfinished(Cursor& c) {
    uint64_t pid, tid;
    if (!(c.lit("[SPANRING_UNFINISHED] v=1 pid=") && c.dec("pid", &pid, UINT32_MAX) &&
          c.lit(" tid=") && c.dec("tid", &tid, UINT32_MAX)))
      return false;
    if (c.s.substr(c.i, 13) == " undescribed=") {
      uint64_t n, deeper;
      if (!(c.lit(" undescribed=") && c.dec("undescribed", &n) &&
            c.lit(" reason=owner_died_deeper_than_") && c.dec("depth", &deeper)))
        return false;
      if (c.i != c.s.size()) return c.fail("unexpected bytes: " + c.show_here());
      v_.undescribed(UndescribedEvent{static_cast<uint32_t>(pid), static_cast<uint32_t>(tid), n});
      ++events_;
      return true;
    }
    uint64_t inv, depth, ts;
    if (!(c.lit(" inv=") && c.dec("inv", &inv) && c.lit(" depth=") &&
          c.dec("depth", &depth, UINT32_MAX) && c.lit(" name=")))
      return false;
    const size_t name_at = c.i;
    const std::string_view name = c.word();
    if (!check_encoded(c, name, name_at, true)) return false;
    if (!(c.lit(" ts=") && c.dec("ts", &ts) && c.lit(" reason=owner_died"))) return false;
    if (c.i != c.s.size()) return c.fail("unexpected bytes after the reason: " + c.show_here());
    v_.unfinished(UnfinishedEvent{static_cast<uint32_t>(pid), static_cast<uint32_t>(tid), inv,
                                  static_cast<uint32_t>(depth), ts, {}, false, name});
    ++events_;
    return true;
  }

  EventVisitor& v_;
  std::string why_;
  uint64_t line_no_ = 1;
  uint64_t trace_lines_ = 0;
  uint64_t other_lines_ = 0;
  uint64_t first_other_ = 0;
  uint64_t events_ = 0;
  std::unordered_set<uint32_t> anchored_;
  std::vector<std::string> notes_;
};

}  // namespace

ReadResult read_strace_text(TraceInput& in, EventVisitor& visitor) {
  ReadResult r;
  r.format = "[STRACE] text";
  const uint64_t start = in.offset();
  TextParser p(visitor);
  std::string chunk(kChunk, '\0');
  std::string line;          // a line that spans chunks (at most kMaxKeptLine bytes of it)
  bool overlong = false;     // the line went on past kMaxKeptLine
  uint64_t line_at = 0;      // offset of the current line's first byte
  std::string first_bytes;   // for the "not a trace" message
  bool saw_nul = false;

  auto finish_line = [&](std::string_view l, uint64_t next_at) -> bool {
    if (!saw_nul && p.trace_lines() == 0 && l.find('\0') != std::string_view::npos) saw_nul = true;
    if (!p.line(l, overlong)) {
      r.status = ReadResult::Status::kCorrupt;
      r.error_offset = line_at;
      r.message = "line " + std::to_string(r.units + 1) + " (byte " + std::to_string(line_at) +
                  "): " + p.why();
      return false;
    }
    ++r.units;
    p.next_line();
    line_at = next_at;
    r.good_bytes = next_at;
    overlong = false;
    return true;
  };

  for (;;) {
    const uint64_t chunk_at = in.offset() - start;
    const size_t n = in.read(chunk.data(), chunk.size());
    if (n == 0) break;
    if (first_bytes.size() < 16) first_bytes.append(chunk.data(), std::min<size_t>(n, 16));
    std::string_view c(chunk.data(), n);
    size_t from = 0;
    while (from < n) {
      const size_t lf = c.find('\n', from);
      if (lf == std::string_view::npos) {
        const size_t room = kMaxKeptLine - std::min(kMaxKeptLine, line.size());
        if (n - from > room) overlong = true;
        line.append(c.data() + from, std::min(room, n - from));
        break;
      }
      const uint64_t next_at = chunk_at + lf + 1;
      bool ok;
      if (line.empty() && !overlong) {
        ok = finish_line(c.substr(from, lf - from), next_at);
      } else {
        const size_t room = kMaxKeptLine - std::min(kMaxKeptLine, line.size());
        if (lf - from > room) overlong = true;
        line.append(c.data() + from, std::min(room, lf - from));
        ok = finish_line(line, next_at);
        line.clear();
      }
      if (!ok) {
        r.bytes_read = in.offset() - start;
        r.events = p.events();
        r.notes = std::move(p.notes());
        return r;
      }
      from = lf + 1;
    }
    // Binary data and no trace line yet: stop reading a file that is not a trace.
    if (p.trace_lines() == 0 && line.find('\0') != std::string::npos) saw_nul = true;
    if (saw_nul && p.trace_lines() == 0) break;
  }
  r.bytes_read = in.offset() - start;
  r.events = p.events();
  r.notes = std::move(p.notes());

  if (p.trace_lines() == 0 && r.bytes_read > 0) {
    r.status = ReadResult::Status::kNotATrace;
    r.message = "read " + std::to_string(r.bytes_read) + " bytes (" + std::to_string(r.units) +
                " complete lines)" +
                std::string(saw_nul ? ", with NUL bytes (binary data) before any trace line" : "") +
                ": no line holds [STRACE], [CLOCK_ANCHOR], "
                "[SPANRING_DROPS] or [SPANRING_UNFINISHED], and it does not start with the "
                "spanring binary magic; it starts with \"" + printable_prefix(first_bytes, 16) +
                "\"";
    return r;
  }
  if (p.other_lines() > 0)
    r.notes.push_back(std::to_string(p.other_lines()) + " line(s) hold no trace token and were "
                      "skipped (the first is line " + std::to_string(p.first_other()) + ")");
  if (!line.empty() || overlong) {
    r.status = ReadResult::Status::kCut;
    r.error_offset = r.bytes_read;
    r.message = "the file is cut at byte " + std::to_string(r.bytes_read) + ", inside line " +
                std::to_string(r.units + 1) + " (it has no LF; the " +
                std::to_string(r.bytes_read - r.good_bytes) + " bytes from byte " +
                std::to_string(r.good_bytes) + " on are ignored)";
  }
  return r;
}

}  // namespace spanring
