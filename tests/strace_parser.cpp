// See strace_parser.h for the grammar and the strictness rules.
#include "strace_parser.h"

#include <cstdio>

namespace spanring_test {
namespace {

constexpr size_t kNameCap = 64;    // encoded bytes (spec, "Truncation")
constexpr size_t kAttrsCap = 192;  // encoded bytes
constexpr size_t kMaxLine = 511;   // bytes including LF: "the longest line stays under 512"

constexpr std::string_view kPrefixStart = "[mono_ns=";
constexpr std::string_view kSpanTag = "emit_host_span: [STRACE] ";
constexpr std::string_view kAnchorTag = "clock_anchor: [CLOCK_ANCHOR] ";
constexpr std::string_view kStraceMarker = "[STRACE]";
constexpr std::string_view kAnchorMarker = "[CLOCK_ANCHOR]";
constexpr std::string_view kDropsMarker = "[SPANRING_DROPS]";

bool is_upper_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether the encoding copies byte b as is (spec: printable ASCII 0x20-0x7E except % [ ]; in
// names also except space and =).
bool copied_as_is(unsigned char b, bool name) {
  if (b < 0x20 || b > 0x7e) return false;
  if (b == '%' || b == '[' || b == ']') return false;
  if (name && (b == ' ' || b == '=')) return false;
  return true;
}

std::string at(size_t byte, const std::string& what) {
  return "byte " + std::to_string(byte) + ": " + what;
}

// What is wrong with a field and where (offset from the field's start).
struct FieldError {
  size_t byte = 0;
  std::string what;  // empty: the field is valid
};
FieldError bad(size_t byte, std::string what) { return {byte, std::move(what)}; }

// Checks an encoded field.
FieldError check_field(std::string_view f, bool name) {
  const char* what = name ? "name" : "attrs";
  const size_t cap = name ? kNameCap : kAttrsCap;
  if (name && f.empty()) return bad(0, "name is empty (a consumer drops such a record)");
  if (f.size() > cap) {
    return bad(cap, std::string(what) + " is " + std::to_string(f.size()) +
                        " encoded bytes, more than the cap of " + std::to_string(cap));
  }
  for (size_t i = 0; i < f.size(); ++i) {
    const auto b = static_cast<unsigned char>(f[i]);
    if (b == '%') {
      if (i + 2 >= f.size()) {
        return bad(i, std::string(what) + ": escape '%' is not followed by two hex digits");
      }
      if (!is_upper_hex(f[i + 1]) || !is_upper_hex(f[i + 2])) {
        return bad(i, std::string(what) + ": escape '" + printable(f.substr(i, 3)) +
                          "' is not '%' + two UPPERCASE hex digits");
      }
      const auto escaped =
          static_cast<unsigned char>(hex_value(f[i + 1]) * 16 + hex_value(f[i + 2]));
      if (copied_as_is(escaped, name)) {
        return bad(i, std::string(what) + ": escape '" + std::string(f.substr(i, 3)) +
                          "' stands for a byte the encoding copies as is");
      }
      if (escaped == 0) {
        return bad(i, std::string(what) + ": escape '%00' (input ends at the first NUL)");
      }
      i += 2;
      continue;
    }
    if (!name && b == ' ') {
      if (i == 0) return bad(i, "attrs start with a space (two spaces after dur)");
      if (f[i - 1] == ' ') return bad(i, "attrs hold two spaces in a row (empty token)");
      if (i + 1 == f.size()) return bad(i, "attrs end with a space (trailing space)");
      continue;
    }
    if (!copied_as_is(b, name)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02X", b);
      return bad(i, std::string(what) + ": byte " + buf + " ('" + printable(f.substr(i, 1)) +
                        "') must be escaped as %XX");
    }
  }
  return {};
}

// A cursor over one line with strict token readers. Every reader returns false and sets err
// on failure.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}

  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ == s_.size(); }
  std::string_view rest() const { return s_.substr(pos_); }
  const std::string& err() const { return err_; }
  size_t err_byte() const { return err_byte_; }

  bool fail(size_t byte, const std::string& what) {
    err_byte_ = byte;
    err_ = at(byte, what);
    return false;
  }

  // The literal `lit` exactly.
  bool literal(std::string_view lit) {
    for (size_t i = 0; i < lit.size(); ++i) {
      if (pos_ + i >= s_.size() || s_[pos_ + i] != lit[i]) {
        std::string msg = "expected '" + printable(lit) + "', found '" +
                          printable(s_.substr(pos_, lit.size() + 8)) + "'";
        if (pos_ + i < s_.size() && s_[pos_ + i] == ' ' && lit[i] != ' ') {
          msg += " (more than one space between tokens?)";
        } else if (pos_ + i >= s_.size() && lit[i] == ' ') {
          msg += " (missing space)";
        }
        return fail(pos_ + i, msg);
      }
    }
    pos_ += lit.size();
    return true;
  }

  // `key=` then an unsigned decimal that fits in 64 bits.
  bool decimal(std::string_view key, uint64_t* out) {
    if (!literal(key) || !literal("=")) return false;
    const size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) {
      return fail(pos_, std::string(key) + ": sign '" + s_[pos_] +
                            "' (numbers are unsigned decimal, no sign)");
    }
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const uint64_t d = static_cast<uint64_t>(s_[pos_] - '0');
      if (v > (UINT64_MAX - d) / 10) {
        return fail(start, std::string(key) + ": does not fit in 64 bits");
      }
      v = v * 10 + d;
      ++pos_;
    }
    if (pos_ == start) {
      return fail(pos_, std::string(key) + ": expected an unsigned decimal, found '" +
                            printable(s_.substr(pos_, 8)) + "'");
    }
    *out = v;
    return true;
  }

  // Lowercase hex digits, 1..16. `no_padding`: a leading 0 only for the value 0 itself.
  bool hex(std::string_view what, bool no_padding, uint64_t* out) {
    const size_t start = pos_;
    if (s_.substr(pos_, 2) == "0x" || s_.substr(pos_, 2) == "0X") {
      return fail(pos_, std::string(what) + ": has a '0x' prefix (a consumer drops such a record)");
    }
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) {
      return fail(pos_, std::string(what) + ": sign '" + s_[pos_] + "' (unsigned)");
    }
    uint64_t v = 0;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c >= 'A' && c <= 'F') return fail(pos_, std::string(what) + ": uppercase hex digit");
      const int d = (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9') ? hex_value(c) : -1;
      if (d < 0) break;
      if (pos_ - start == 16) return fail(start, std::string(what) + ": more than 16 hex digits");
      v = v * 16 + static_cast<uint64_t>(d);
      ++pos_;
    }
    if (pos_ == start) {
      return fail(pos_, std::string(what) + ": expected lowercase hex, found '" +
                            printable(s_.substr(pos_, 8)) + "'");
    }
    if (no_padding && pos_ - start > 1 && s_[start] == '0') {
      return fail(start, std::string(what) + ": padded with a leading 0");
    }
    *out = v;
    return true;
  }

  // Bytes up to (not including) the next space, or to the end.
  std::string_view word() {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ' ') ++pos_;
    return s_.substr(start, pos_ - start);
  }

  void skip(size_t n) { pos_ += n; }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  std::string err_;
  size_t err_byte_ = 0;
};

ParseResult failed(const Cursor& c) {
  ParseResult r;
  r.error = c.err();
  r.error_byte = c.err_byte();
  return r;
}

ParseResult failed_at(size_t byte, const std::string& what) {
  ParseResult r;
  r.error = at(byte, what);
  r.error_byte = byte;
  return r;
}

// `[mono_ns=<E>][T0x<P>][TIMING] ` (the tag after it is read by the caller).
bool prefix(Cursor& c, LinePrefix* p) {
  if (!c.decimal("[mono_ns", &p->mono_ns)) return false;
  if (!c.literal("][T0x")) return false;
  if (!c.hex("prefix thread id", /*no_padding=*/false, &p->thread)) return false;
  if (!c.literal("][TIMING] ")) return false;
  p->present = true;
  return true;
}

bool span_fields(Cursor& c, SpanLine* s) {
  if (!c.literal("v=1 ")) return false;
  if (!c.decimal("pid", &s->pid) || !c.literal(" ")) return false;
  if (!c.decimal("tid", &s->tid) || !c.literal(" ")) return false;
  if (!c.decimal("inv", &s->inv) || !c.literal(" ")) return false;
  if (!c.literal("hid=") || !c.hex("hid", /*no_padding=*/true, &s->hid) || !c.literal(" ")) {
    return false;
  }
  if (!c.decimal("depth", &s->depth) || !c.literal(" ")) return false;
  if (!c.literal("name=")) return false;
  const size_t name_at = c.pos();
  const std::string_view name = c.word();
  if (FieldError e = check_field(name, /*name=*/true); !e.what.empty()) {
    return c.fail(name_at + e.byte, e.what);
  }
  s->name = std::string(name);
  if (!c.literal(" ")) return false;
  if (!c.decimal("ts", &s->ts) || !c.literal(" ")) return false;
  if (!c.decimal("dur", &s->dur)) return false;
  if (c.at_end()) {
    return c.fail(c.pos(),
                  "missing space after the dur value (a line without attributes "
                  "still ends 'dur=<n> ' then LF)");
  }
  if (!c.literal(" ")) return false;
  const size_t attrs_at = c.pos();
  const std::string_view attrs = c.rest();
  if (FieldError e = check_field(attrs, /*name=*/false); !e.what.empty()) {
    return c.fail(attrs_at + e.byte, e.what);
  }
  s->attrs = std::string(attrs);
  c.skip(attrs.size());
  return true;
}

bool end_of_line(Cursor& c, std::string_view after) {
  if (c.at_end()) return true;
  return c.fail(c.pos(), "unexpected '" + printable(c.rest(), 16) + "' after " +
                             std::string(after) + " (the line must end here)");
}

}  // namespace

std::string printable(std::string_view s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7f && b != '\\') {
      out += static_cast<char>(b);
    } else if (b == '\n') {
      out += "\\n";
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

std::string check_name_field(std::string_view field) {
  const FieldError e = check_field(field, /*name=*/true);
  return e.what.empty() ? std::string() : at(e.byte, e.what);
}
std::string check_attrs_field(std::string_view field) {
  const FieldError e = check_field(field, /*name=*/false);
  return e.what.empty() ? std::string() : at(e.byte, e.what);
}

std::string decode_field(std::string_view f) {
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 2 < f.size() && hex_value(f[i + 1]) >= 0 && hex_value(f[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(f[i + 1]) * 16 + hex_value(f[i + 2]));
      i += 2;
    } else {
      out += f[i];
    }
  }
  return out;
}

std::optional<std::string_view> attr_value(std::string_view attrs, std::string_view key) {
  size_t pos = 0;
  while (pos <= attrs.size()) {
    size_t end = attrs.find(' ', pos);
    if (end == std::string_view::npos) end = attrs.size();
    const std::string_view token = attrs.substr(pos, end - pos);
    if (token.size() > key.size() && token.substr(0, key.size()) == key &&
        token[key.size()] == '=') {
      return token.substr(key.size() + 1);
    }
    pos = end + 1;
  }
  return std::nullopt;
}

bool is_device_span(const SpanLine& span) {
  const auto clk = attr_value(span.attrs, "clk");
  return clk && *clk == "dev";
}

ParseResult parse_line(std::string_view line) {
  if (line.empty() || line.back() != '\n') {
    return failed_at(line.size(), "line does not end with LF (cut or unterminated line)");
  }
  if (line.size() > kMaxLine) {
    return failed_at(kMaxLine, "line is " + std::to_string(line.size()) +
                                   " bytes with its LF; the format keeps every line under 512");
  }
  const std::string_view body = line.substr(0, line.size() - 1);
  if (const size_t lf = body.find('\n'); lf != std::string_view::npos) {
    return failed_at(lf, "LF inside the line");
  }
  if (const size_t cr = body.find('\r'); cr != std::string_view::npos) {
    return failed_at(cr, "CR in the line (lines end with LF only)");
  }

  ParseResult r;
  Cursor c(body);
  const size_t strace_at = body.find(kStraceMarker);
  const size_t anchor_at = body.find(kAnchorMarker);
  const size_t drops_at = body.find(kDropsMarker);

  if (strace_at != std::string_view::npos) {
    r.line.kind = LineKind::kSpan;
    SpanLine& s = r.line.span;
    if (strace_at != 0) {
      if (body.substr(0, kPrefixStart.size()) != kPrefixStart) {
        return failed_at(0,
                         "text before [STRACE] that is not the '[mono_ns=<E>][T0x<P>]"
                         "[TIMING] emit_host_span: ' prefix");
      }
      if (!prefix(c, &s.prefix) || !c.literal(kSpanTag)) return failed(c);
      if (c.pos() != strace_at + kStraceMarker.size() + 1) {
        return failed_at(c.pos(), "prefix does not lead straight to [STRACE]");
      }
    } else {
      c.skip(kStraceMarker.size());
      if (!c.literal(" ")) return failed(c);
    }
    if (!span_fields(c, &s) || !end_of_line(c, "the attributes")) return failed(c);
    return r;
  }

  if (anchor_at != std::string_view::npos) {
    r.line.kind = LineKind::kAnchor;
    AnchorLine& a = r.line.anchor;
    if (anchor_at == 0 || body.substr(0, kPrefixStart.size()) != kPrefixStart) {
      return failed_at(0,
                       "[CLOCK_ANCHOR] line without the required '[mono_ns=<E>][T0x<P>]"
                       "[TIMING] clock_anchor: ' prefix");
    }
    if (!prefix(c, &a.prefix) || !c.literal(kAnchorTag)) return failed(c);
    if (!c.literal("v=1 ")) return failed(c);
    if (!c.decimal("pid", &a.pid) || !c.literal(" ")) return failed(c);
    if (!c.decimal("mono_ns", &a.mono_ns) || !c.literal(" ")) return failed(c);
    if (!c.decimal("wall_ns", &a.wall_ns) || !end_of_line(c, "wall_ns")) return failed(c);
    return r;
  }

  if (drops_at != std::string_view::npos) {
    r.line.kind = LineKind::kDrops;
    DropsLine& d = r.line.drops;
    if (drops_at != 0) return failed_at(0, "text before [SPANRING_DROPS]");
    c.skip(kDropsMarker.size());
    if (!c.literal(" v=1 ")) return failed(c);
    if (!c.decimal("pid", &d.pid) || !c.literal(" ")) return failed(c);
    if (!c.decimal("tid", &d.tid) || !c.literal(" ")) return failed(c);
    if (!c.decimal("dropped", &d.dropped) || !c.literal(" ")) return failed(c);
    if (!c.decimal("first_seq", &d.first_seq) || !c.literal(" ")) return failed(c);
    if (!c.decimal("last_seq", &d.last_seq) || !c.literal(" ")) return failed(c);
    if (!c.literal("reason=")) return failed(c);
    const size_t reason_at = c.pos();
    const std::string_view reason = c.word();
    if (reason.empty()) return failed_at(reason_at, "empty drop reason");
    for (size_t i = 0; i < reason.size(); ++i) {
      const char ch = reason[i];
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) {
        return failed_at(reason_at + i, "drop reason holds '" + printable(reason.substr(i, 1)) +
                                            "' (expected [a-z0-9_]+)");
      }
    }
    d.reason = std::string(reason);
    if (!end_of_line(c, "reason")) return failed(c);
    return r;
  }

  r.line.kind = LineKind::kOther;
  return r;
}

ParsedText parse_text(std::string_view text, bool allow_other) {
  ParsedText out;
  size_t pos = 0;
  size_t line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    const bool terminated = end != std::string_view::npos;
    end = terminated ? end + 1 : text.size();
    const std::string_view line = text.substr(pos, end - pos);
    ParseResult r = parse_line(line);
    if (!r.ok()) {
      out.errors.push_back("line " + std::to_string(line_no) + ": " + r.error + "  [" +
                           printable(line) + "]");
    } else {
      if (r.line.kind == LineKind::kOther) {
        ++out.other_lines;
        if (!allow_other) {
          out.errors.push_back("line " + std::to_string(line_no) +
                               ": not a [STRACE], [CLOCK_ANCHOR] or [SPANRING_DROPS] line  [" +
                               printable(line) + "]");
        }
      }
      out.lines.push_back(std::move(r.line));
    }
    pos = end;
  }
  return out;
}

}  // namespace spanring_test
