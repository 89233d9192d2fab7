// The test suite's own [STRACE] parser (strace_parser.h) against the spec's example lines and
// against lines that break one rule each. The parser is the independent consumer that the
// multi-process tests run on spanring's output, so it must reject what the spec rejects.
#include "strace_parser.h"

#include <doctest/doctest.h>

#include <string>
#include <string_view>

using namespace spanring_test;

namespace {

// The example lines of shared/strace-format.md, verbatim (plus their LF).
constexpr std::string_view kAnchor =
    "[mono_ns=5000000000][T0x1068][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=4200 "
    "mono_ns=5000000000 wall_ns=1767225600000000000\n";
constexpr std::string_view kChipRun =
    "[mono_ns=5001960000][T0x10a2][TIMING] emit_host_span: [STRACE] v=1 pid=4242 tid=4258 inv=1 "
    "hid=9f3c2a1b5d7e6f01 depth=0 name=chip.run ts=5001000000 dur=960000 run_id=0 slot_id=0\n";
constexpr std::string_view kBindArgs =
    "[mono_ns=5001130000][T0x10a2][TIMING] emit_host_span: [STRACE] v=1 pid=4242 tid=4258 inv=1 "
    "hid=9f3c2a1b5d7e6f01 depth=2 name=chip.run.bind.args ts=5001010000 dur=120000 ntensor=4\n";
constexpr std::string_view kExt =
    "[mono_ns=5000300000][T0x1068][TIMING] emit_host_span: [STRACE] v=1 pid=4200 tid=4200 inv=0 "
    "hid=0 depth=0 name=ext.pypto.decode_layer ts=5000100000 dur=190000 batch=16 layer=3\n";
constexpr std::string_view kDevice =
    "[mono_ns=5001900100][T0x10a2][TIMING] emit_host_span: [STRACE] v=1 pid=4242 tid=4258 inv=1 "
    "hid=9f3c2a1b5d7e6f01 depth=3 name=chip.run.runner_run.device_wall.orch ts=20000 dur=300000 "
    "clk=dev\n";
constexpr std::string_view kOdd =
    "[mono_ns=5006000000][T0x10a2][TIMING] emit_host_span: [STRACE] v=1 pid=4242 tid=4258 inv=0 "
    "hid=0 depth=0 name=ext.app.odd%20name%3Dx ts=5005900000 dur=50000 why=%5Bdemo%5D\n";
constexpr std::string_view kNoAttrs =
    "[mono_ns=5007000000][T0x10a2][TIMING] emit_host_span: [STRACE] v=1 pid=4242 tid=4258 inv=2 "
    "hid=0 depth=0 name=l3.graph_build ts=5006950000 dur=50000 \n";

// A bare span line (no prefix) to derive malformed variants from.
const std::string kBare =
    "[STRACE] v=1 pid=7 tid=8 inv=3 hid=ab depth=1 name=a.b ts=100 dur=20 k=v\n";

// Replaces the first `from` in `line` by `to`; the test fails if `from` is absent.
std::string with(std::string line, std::string_view from, std::string_view to) {
  const size_t at = line.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "test bug: '", from, "' not in the line");
  line.replace(at, from.size(), to);
  return line;
}

// Parses a line that must be rejected; returns the result for further checks.
ParseResult rejected(const std::string& line) {
  ParseResult r = parse_line(line);
  CHECK_MESSAGE(!r.ok(), "accepted a malformed line: ", printable(line));
  return r;
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("the spec's clock anchor example parses into its fields") {
  const ParseResult r = parse_line(kAnchor);
  REQUIRE_MESSAGE(r.ok(), r.error);
  REQUIRE(r.line.kind == LineKind::kAnchor);
  CHECK(r.line.anchor.prefix.present);
  CHECK(r.line.anchor.prefix.mono_ns == 5000000000u);
  CHECK(r.line.anchor.prefix.thread == 0x1068u);
  CHECK(r.line.anchor.pid == 4200u);
  CHECK(r.line.anchor.mono_ns == 5000000000u);
  CHECK(r.line.anchor.wall_ns == 1767225600000000000u);
}

TEST_CASE("every span example of the spec parses, with the fields it shows") {
  for (std::string_view line : {kChipRun, kBindArgs, kExt, kDevice, kOdd, kNoAttrs}) {
    CAPTURE(line);
    const ParseResult r = parse_line(line);
    REQUIRE_MESSAGE(r.ok(), r.error);
    CHECK(r.line.kind == LineKind::kSpan);
    CHECK(r.line.span.prefix.present);
  }
  const SpanLine s = parse_line(kChipRun).line.span;
  CHECK(s.prefix.mono_ns == 5001960000u);
  CHECK(s.prefix.thread == 0x10a2u);
  CHECK(s.pid == 4242u);
  CHECK(s.tid == 4258u);
  CHECK(s.inv == 1u);
  CHECK(s.hid == 0x9f3c2a1b5d7e6f01u);
  CHECK(s.depth == 0u);
  CHECK(s.name == "chip.run");
  CHECK(s.ts == 5001000000u);
  CHECK(s.dur == 960000u);
  CHECK(s.attrs == "run_id=0 slot_id=0");
  CHECK(attr_value(s.attrs, "slot_id") == std::string_view("0"));
  CHECK_FALSE(attr_value(s.attrs, "slot").has_value());
  CHECK_FALSE(is_device_span(s));
}

TEST_CASE("the device span example is recognised by its clk=dev attribute") {
  const SpanLine s = parse_line(kDevice).line.span;
  CHECK(s.ts == 20000u);
  CHECK(is_device_span(s));
}

TEST_CASE("escaped names and attributes are kept encoded and decode to the raw bytes") {
  const SpanLine s = parse_line(kOdd).line.span;
  CHECK(s.name == "ext.app.odd%20name%3Dx");
  CHECK(decode_field(s.name) == "ext.app.odd name=x");
  CHECK(s.attrs == "why=%5Bdemo%5D");
  CHECK(decode_field(s.attrs) == "why=[demo]");
}

TEST_CASE("a span without attributes ends with the space after dur and has empty attrs") {
  const ParseResult r = parse_line(kNoAttrs);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.line.span.attrs.empty());
  CHECK(r.line.span.dur == 50000u);
}

TEST_CASE("the prefix is optional on a span line") {
  const ParseResult r = parse_line(kBare);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.line.kind == LineKind::kSpan);
  CHECK_FALSE(r.line.span.prefix.present);
  CHECK(r.line.span.hid == 0xabu);
  CHECK(r.line.span.attrs == "k=v");
}

TEST_CASE("a drop line parses into its fields and is not a span") {
  const ParseResult r = parse_line(
      "[SPANRING_DROPS] v=1 pid=10 tid=11 dropped=5 first_seq=100 last_seq=104 reason=ring_full\n");
  REQUIRE_MESSAGE(r.ok(), r.error);
  REQUIRE(r.line.kind == LineKind::kDrops);
  CHECK(r.line.drops.pid == 10u);
  CHECK(r.line.drops.tid == 11u);
  CHECK(r.line.drops.dropped == 5u);
  CHECK(r.line.drops.first_seq == 100u);
  CHECK(r.line.drops.last_seq == 104u);
  CHECK(r.line.drops.reason == "ring_full");
}

TEST_CASE("a line with no marker is 'other', and parse_text reports it unless allowed") {
  const ParseResult r = parse_line("hello world\n");
  REQUIRE(r.ok());
  CHECK(r.line.kind == LineKind::kOther);
  const std::string text = std::string(kAnchor) + "hello\n" + std::string(kNoAttrs);
  CHECK(parse_text(text, /*allow_other=*/true).errors.empty());
  const ParsedText strict = parse_text(text);
  REQUIRE(strict.errors.size() == 1);
  CHECK(strict.errors[0].find("line 2:") == 0);
}

TEST_CASE("parse_text reports an unterminated last line") {
  const std::string text = std::string(kAnchor) + kBare.substr(0, kBare.size() - 1);
  const ParsedText t = parse_text(text);
  REQUIRE(t.errors.size() == 1);
  CHECK(t.errors[0].find("line 2:") == 0);
  CHECK(t.errors[0].find("LF") != std::string::npos);
}

TEST_CASE("a negative or signed number is rejected at the sign") {
  const ParseResult r = rejected(with(kBare, "pid=7", "pid=-7"));
  CHECK(r.error_byte == kBare.find("pid=") + 4);
  CHECK(r.error.find("sign") != std::string::npos);
  rejected(with(kBare, "ts=100", "ts=+100"));
  rejected(with(kBare, "dur=20", "dur=-20"));
  rejected(with(kBare, "depth=1", "depth=-1"));
}

TEST_CASE("a number that does not fit in 64 bits is rejected") {
  rejected(with(kBare, "inv=3", "inv=18446744073709551616"));
  CHECK(parse_line(with(kBare, "inv=3", "inv=18446744073709551615")).ok());
}

TEST_CASE("a hid with 0x, uppercase digits, padding or more than 16 digits is rejected") {
  const ParseResult r = rejected(with(kBare, "hid=ab", "hid=0xab"));
  CHECK(r.error_byte == kBare.find("hid=") + 4);
  CHECK(r.error.find("0x") != std::string::npos);
  rejected(with(kBare, "hid=ab", "hid=AB"));
  rejected(with(kBare, "hid=ab", "hid=00ab"));
  rejected(with(kBare, "hid=ab", "hid=1ffffffffffffffff"));
  rejected(with(kBare, "hid=ab", "hid="));
  CHECK(parse_line(with(kBare, "hid=ab", "hid=0")).ok());
  CHECK(parse_line(with(kBare, "hid=ab", "hid=ffffffffffffffff")).ok());
}

TEST_CASE("an empty name is rejected") {
  const ParseResult r = rejected(with(kBare, "name=a.b", "name="));
  CHECK(r.error_byte == kBare.find("name=") + 5);
  CHECK(r.error.find("empty") != std::string::npos);
}

TEST_CASE("a name of 64 bytes is accepted and one of 65 bytes is rejected at byte 64") {
  CHECK(parse_line(with(kBare, "name=a.b", "name=" + std::string(64, 'n'))).ok());
  const ParseResult r = rejected(with(kBare, "name=a.b", "name=" + std::string(65, 'n')));
  CHECK(r.error_byte == kBare.find("name=") + 5 + 64);
}

TEST_CASE("attrs of 192 bytes are accepted and 193 bytes are rejected") {
  const std::string a192 = "k=" + std::string(190, 'v');
  CHECK(parse_line(with(kBare, "k=v", a192)).ok());
  rejected(with(kBare, "k=v", a192 + "w"));
}

TEST_CASE("two spaces between tokens are rejected at the second space") {
  const ParseResult r = rejected(with(kBare, "pid=7 tid", "pid=7  tid"));
  CHECK(r.error_byte == kBare.find(" tid") + 1);
  rejected(with(kBare, "[STRACE] v", "[STRACE]  v"));
  rejected(with(kBare, "dur=20 k=v", "dur=20  k=v"));
  rejected(with(kBare, "k=v", "k=v  x=y"));
  rejected(with(kBare, "k=v\n", "k=v \n"));
}

TEST_CASE("a line without attributes must still end with the space after dur") {
  const std::string no_space = with(kBare, "dur=20 k=v\n", "dur=20\n");
  const ParseResult r = rejected(no_space);
  CHECK(r.error_byte == no_space.size() - 1);
  CHECK(r.error.find("missing space") != std::string::npos);
}

TEST_CASE("a line without LF, with CR, or of 512 bytes or more is rejected") {
  rejected(kBare.substr(0, kBare.size() - 1));
  rejected(with(kBare, "k=v\n", "k=v\r\n"));
  rejected("");
  // Leading zeros keep ts == 1 while making the line exactly as long as wanted.
  const auto line_of = [](size_t size) {
    const std::string head =
        "[mono_ns=1][T0x1][TIMING] emit_host_span: [STRACE] v=1 pid=1 tid=1 "
        "inv=0 hid=0 depth=0 name=" +
        std::string(64, 'n') + " ts=";
    const std::string tail = "1 dur=1 k=" + std::string(190, 'v') + "\n";
    REQUIRE(head.size() + tail.size() <= size);
    return head + std::string(size - head.size() - tail.size(), '0') + tail;
  };
  CHECK(parse_line(line_of(511)).ok());  // the longest line allowed, LF included
  const ParseResult r = rejected(line_of(512));
  CHECK(r.error.find("512") != std::string::npos);
}

TEST_CASE("tokens out of order, missing, or with another version are rejected") {
  rejected(with(kBare, "pid=7 tid=8", "tid=8 pid=7"));
  rejected(with(kBare, "inv=3 ", ""));
  rejected(with(kBare, "v=1", "v=2"));
  rejected(with(kBare, "ts=100", "start=100"));
}

TEST_CASE("raw bytes that the encoding escapes are rejected in names and attrs") {
  rejected(with(kBare, "name=a.b", "name=a=b"));
  rejected(with(kBare, "name=a.b", "name=a[b"));
  rejected(with(kBare, "name=a.b", "name=a%b"));
  rejected(with(kBare, "name=a.b", "name=a\tb"));
  rejected(with(kBare, "name=a.b", "name=a\xc3\xa9"));
  rejected(with(kBare, "k=v", "k=[v]"));
  rejected(with(kBare, "k=v", "k=v\x7f"));
  // Space and = are raw in attrs, and : . ~ " / are never escaped.
  CHECK(parse_line(with(kBare, "k=v", "k=a=b url=a/b:c~d\"e")).ok());
  CHECK(parse_line(with(kBare, "name=a.b", "name=a/b:c~d\"e")).ok());
}

TEST_CASE("escapes must be % with two uppercase hex digits for a byte that needs escaping") {
  CHECK(parse_line(with(kBare, "name=a.b", "name=a%0Ab%C3%A9")).ok());
  rejected(with(kBare, "name=a.b", "name=a%0ab"));  // lowercase digit
  rejected(with(kBare, "name=a.b", "name=a%0"));    // cut escape
  rejected(with(kBare, "k=v", "k=v%"));             // cut escape at the end
  rejected(with(kBare, "name=a.b", "name=a%41"));   // 'A' is copied as is, never escaped
  rejected(with(kBare, "name=a.b", "name=a%00"));   // input ends at NUL: never encoded
  rejected(with(kBare, "k=v", "k=%20"));            // space is raw in attrs
  rejected(with(kBare, "k=v", "k=%3D"));            // = is raw in attrs
  CHECK(parse_line(with(kBare, "name=a.b", "name=a%20%3D")).ok());  // but escaped in names
}

TEST_CASE("an anchor needs the full prefix, v=1, and no trailing space") {
  const std::string bare_anchor(kAnchor.substr(kAnchor.find("[CLOCK_ANCHOR]")));
  rejected(bare_anchor);
  rejected(with(std::string(kAnchor), "clock_anchor:", "clock_anchr:"));
  rejected(with(std::string(kAnchor), "v=1", "v=2"));
  rejected(with(std::string(kAnchor), "\n", " \n"));
  rejected(with(std::string(kAnchor), "mono_ns=5000000000 ", "mono_ns=-5000000000 "));
  rejected(with(std::string(kAnchor), "[T0x1068]", "[T0x10A8]"));
}

TEST_CASE("text before [STRACE] other than the exact prefix is rejected") {
  rejected("log: " + kBare);
  rejected(with(std::string(kChipRun), "emit_host_span: ", "emit_host_span:  "));
  rejected(with(std::string(kChipRun), "[TIMING]", "[INFO]"));
  rejected(with(std::string(kChipRun), "[T0x10a2]", "[T0x10A2]"));
  rejected(with(std::string(kChipRun), "[mono_ns=5001960000]", "[mono_ns=-1]"));
}

TEST_CASE("a malformed drop line is rejected") {
  const std::string ok =
      "[SPANRING_DROPS] v=1 pid=1 tid=2 dropped=3 first_seq=4 last_seq=6 reason=ring_full\n";
  REQUIRE(parse_line(ok).ok());
  rejected(with(ok, "dropped=3", "dropped=-3"));
  rejected(with(ok, "reason=ring_full", "reason="));
  rejected(with(ok, "reason=ring_full", "reason=ring full"));
  rejected(with(ok, "\n", " \n"));
  rejected("x " + ok);
}

TEST_CASE("every error names the byte at which it was found") {
  const ParseResult r = rejected(with(kBare, "pid=7", "pid=-7"));
  CHECK(r.error.rfind("byte " + std::to_string(r.error_byte) + ": ", 0) == 0);
}

TEST_CASE("field checks work on their own and point into the field") {
  CHECK(check_name_field("chip.run").empty());
  CHECK(check_name_field("").find("byte 0:") == 0);
  CHECK(check_name_field("ab cd").find("byte 2:") == 0);
  CHECK(check_attrs_field("").empty());
  CHECK(check_attrs_field("a=1 b=2").empty());
  CHECK(check_attrs_field("a=1  b=2").find("byte 4:") == 0);
}

}  // TEST_SUITE("unit")
