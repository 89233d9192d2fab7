// A strict parser of one line of spanring's text output, written from shared/strace-format.md
// (the [STRACE] spec) and the drop-line contract of `spanring run`, not from the drainer's code:
// the tests use it as the independent consumer the spec talks about.
//
// It accepts exactly three kinds of line and calls everything else "other":
//
//   span    [mono_ns=<E>][T0x<P>][TIMING] emit_host_span: [STRACE] v=1 pid=.. tid=.. inv=..
//           hid=.. depth=.. name=.. ts=.. dur=.. <attrs>LF       (the prefix is optional)
//   anchor  [mono_ns=<E>][T0x<P>][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=.. mono_ns=..
//           wall_ns=..LF                                          (the prefix is required)
//   drops   [SPANRING_DROPS] v=1 pid=.. tid=.. dropped=.. first_seq=.. last_seq=.. reason=..LF
//
// Strictness, rule by rule (each from the spec unless marked "choice"):
// - tokens in exactly the order above, separated by exactly one ASCII space;
// - decimal numbers are unsigned ([0-9]+, no sign) and must fit in 64 bits;
// - `hid` is lowercase hex without `0x` and without padding (`0` alone is zero), <= 16 digits;
// - `name` is 1..64 encoded bytes, `attrs` 0..192 encoded bytes; both may hold only the bytes the
//   encoding copies as is (printable ASCII except % [ ], and in names also except space and =)
//   plus `%XX` escapes with two UPPERCASE hex digits that stand for a byte the encoding does
//   escape (choice: `%41` for `A` is rejected, because the encoder never writes it);
// - a span line without attributes ends `dur=<n> ` then LF; an anchor or drop line ends with its
//   last value then LF (no trailing space);
// - attrs are single-space-separated tokens: no leading, trailing or double space. A token need
//   not contain `=` (a cut field ends in a bare `~` token, and raw producer text is passed on);
// - a line is at most 511 bytes including its LF ("stays under 512 bytes");
// - text before `[STRACE]` is either nothing or the exact prefix (choice: consumers find
//   `[STRACE]` anywhere, but spanring writes one of those two forms, so anything else is a bug);
// - the line holds no CR and exactly one LF, at its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spanring_test {

enum class LineKind { kSpan, kAnchor, kDrops, kOther };

// `[mono_ns=<E>][T0x<P>][TIMING] <tag>: `
struct LinePrefix {
  bool present = false;
  uint64_t mono_ns = 0;  // E
  uint64_t thread = 0;   // P, parsed from lowercase hex
};

struct SpanLine {
  LinePrefix prefix;
  uint64_t pid = 0;
  uint64_t tid = 0;
  uint64_t inv = 0;
  uint64_t hid = 0;
  uint64_t depth = 0;
  std::string name;  // encoded, as in the line
  uint64_t ts = 0;
  uint64_t dur = 0;
  std::string attrs;  // encoded, as in the line, without the separating space; may be empty
};

struct AnchorLine {
  LinePrefix prefix;
  uint64_t pid = 0;
  uint64_t mono_ns = 0;
  uint64_t wall_ns = 0;
};

struct DropsLine {
  uint64_t pid = 0;
  uint64_t tid = 0;
  uint64_t dropped = 0;
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  std::string reason;  // [a-z0-9_]+
};

struct ParsedLine {
  LineKind kind = LineKind::kOther;
  SpanLine span;      // kind == kSpan
  AnchorLine anchor;  // kind == kAnchor
  DropsLine drops;    // kind == kDrops
};

struct ParseResult {
  bool ok() const { return error.empty(); }
  ParsedLine line;
  // Empty on success; else "byte <N>: <what is wrong>" where N is the 0-based byte offset in
  // the line at which the problem was found.
  std::string error;
  size_t error_byte = 0;
};

// Parses one line, which must include its terminating LF.
ParseResult parse_line(std::string_view line);

// Checks an encoded field on its own. Return "" when valid, else "byte <N>: <reason>" with N
// relative to the field's start.
std::string check_name_field(std::string_view field);
std::string check_attrs_field(std::string_view field);

// Undoes the encoding (%XX -> byte). The field must be valid.
std::string decode_field(std::string_view field);

// The value of the first attribute token `key=value` in an attrs field, or nullopt.
std::optional<std::string_view> attr_value(std::string_view attrs, std::string_view key);

// True when the span carries the attribute `clk=dev` (its ts is a device-clock offset).
bool is_device_span(const SpanLine& span);

// A whole output file: every line parsed, errors collected as "line <L>: byte <N>: ...".
struct ParsedText {
  std::vector<ParsedLine> lines;
  std::vector<std::string> errors;  // parse errors and lines of kind kOther
  size_t other_lines = 0;
};
// When allow_other is false, a line of kind kOther is reported as an error too.
ParsedText parse_text(std::string_view text, bool allow_other = false);

// Makes a byte string printable for failure messages (non-printables as \xNN, at most `max`
// input bytes).
std::string printable(std::string_view s, size_t max = 120);

}  // namespace spanring_test
