// The fault tests' own checker (fault_check.h) on hand-made input: it accepts a correct trace
// and finds each kind of mistake the fault tests rely on it to find. Without these, a checker
// that accepted everything would make every fault test pass.
#include "fault_check.h"

#include <doctest/doctest.h>

#include <string>

using namespace fault;
using spanring_test::Summary;

namespace {

const std::string kOut = "/tmp/x.strace";
const std::string kStderr = "spanring: wrote 3 records to /tmp/x.strace\n";

// Two pids, three spans, a ring_full drop of pid 100, a vfork drop, one unfinished span.
const std::string kGood =
    "[mono_ns=1000][T0x64][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=100 mono_ns=1000 "
    "wall_ns=5\n"
    "[mono_ns=1500][T0x64][TIMING] emit_host_span: [STRACE] v=1 pid=100 tid=100 inv=0 hid=0 "
    "depth=0 name=a.b ts=1000 dur=500 k=v\n"
    "[SPANRING_DROPS] v=1 pid=100 tid=100 dropped=2 first_seq=1 last_seq=2 reason=ring_full\n"
    "[mono_ns=1600][T0x64][TIMING] emit_host_span: [STRACE] v=1 pid=100 tid=100 inv=0 hid=0 "
    "depth=0 name=a.b ts=1100 dur=500 \n"
    "[mono_ns=2000][T0xc8][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=200 mono_ns=2000 "
    "wall_ns=5\n"
    "[mono_ns=2500][T0xc9][TIMING] emit_host_span: [STRACE] v=1 pid=200 tid=201 inv=7 hid=ab "
    "depth=1 name=c ts=2000 dur=500 \n"
    "[SPANRING_UNFINISHED] v=1 pid=200 tid=201 inv=7 depth=0 name=open.one ts=1999 "
    "reason=owner_died\n"
    "[SPANRING_DROPS] v=1 pid=0 tid=0 dropped=3 first_seq=0 last_seq=0 reason=vfork\n";

Summary good_summary() {
  Summary s;
  s.written = 3;
  s.dropped = 5;
  s.unfinished = 1;
  s.processes = 2;
  s.threads = 2;
  return s;
}

std::vector<std::string> problems_of(const std::string& text, const Summary& s) {
  return invariant_problems(scan_text(text), s, kStderr, kOut);
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("spec_encode reproduces the examples of the [STRACE] spec") {
  // "Truncation", the worked example: at the cap, the whole last %0A goes, then `~`.
  CHECK(spec_encode("\n" + std::string(186, 'x') + "\ny", false) ==
        "%0A" + std::string(186, 'x') + "~");
  CHECK(spec_encode("ext.app.odd name=x", true) == "ext.app.odd%20name%3Dx");
  CHECK(spec_encode("why=[demo]", false) == "why=%5Bdemo%5D");
  CHECK(spec_encode("\xc3\xa9", true) == "%C3%A9");
  CHECK(spec_encode("a\tb%c", false) == "a%09b%25c");
  CHECK(spec_encode(":.~\"/", true) == ":.~\"/");  // never escaped
  CHECK(spec_encode(std::string("ab\0cd", 5), true) == "ab");  // input ends at NUL
  CHECK(spec_encode(std::string(64, 'a'), true) == std::string(64, 'a'));
  CHECK(spec_encode(std::string(65, 'a'), true) == std::string(63, 'a') + "~");
  CHECK(spec_encode(std::string(62, 'a') + "\n", true) == std::string(62, 'a') + "~");
  CHECK(spec_encode(std::string(61, 'a') + "\n", true) == std::string(61, 'a') + "%0A");
  CHECK(spec_encode(std::string(61, 'a') + "\nb", true) == std::string(61, 'a') + "~");
  CHECK(spec_encode(std::string(32, 'a'), true, true) == std::string(32, 'a') + "~");
  CHECK(spec_encode(std::string(16, 'a') + std::string(16, '%'), true, true) ==
        std::string(16, 'a') + [] {
          std::string s;
          for (int i = 0; i < 15; ++i) s += "%25";
          return s;
        }() + "~");
}

TEST_CASE("the checker accepts a correct trace with drops and an unfinished span") {
  const TraceFacts f = scan_text(kGood);
  CHECK(f.error_count == 0);
  CHECK(f.span_lines == 3);
  CHECK(f.unfinished.size() == 1);
  CHECK(f.dropped_total() == 5);
  CHECK(f.dropped_with_reason("vfork") == 3);
  CHECK(f.dropped_by_owner().size() == 1);
  const auto p = invariant_problems(f, good_summary(), kStderr, kOut);
  CHECK_MESSAGE(p.empty(), describe(p));
  REQUIRE(f.unfinished.size() == 1);
  CHECK(f.unfinished[0].name == "open.one");
  CHECK(f.unfinished[0].inv == 7);
  CHECK(f.unfinished[0].ts == 1999);
}

TEST_CASE("the checker rejects broken lines and summaries that do not match the file") {
  // A line cut short (no LF), a half escape, an unknown line kind.
  CHECK(scan_text(kGood + "[SPANRING_DROPS] v=1 pid=1 tid=1 dropped=1").error_count == 1);
  CHECK(scan_text(kGood + "[mono_ns=2600][T0xc9][TIMING] emit_host_span: [STRACE] v=1 pid=200 "
                          "tid=201 inv=7 hid=ab depth=1 name=c%0 ts=2100 dur=500 \n")
            .error_count == 1);
  CHECK(scan_text(kGood + "hello\n").error_count == 1);
  // Unfinished lines: a missing reason, an empty name, a signed number, a trailing space.
  std::string why;
  CHECK_FALSE(parse_unfinished("[SPANRING_UNFINISHED] v=1 pid=1 tid=1 inv=0 depth=0 name=a "
                               "ts=5\n", &why));
  CHECK_FALSE(parse_unfinished("[SPANRING_UNFINISHED] v=1 pid=1 tid=1 inv=0 depth=0 name= "
                               "ts=5 reason=owner_died\n", &why));
  CHECK_FALSE(parse_unfinished("[SPANRING_UNFINISHED] v=1 pid=1 tid=1 inv=-1 depth=0 name=a "
                               "ts=5 reason=owner_died\n", &why));
  CHECK_FALSE(parse_unfinished("[SPANRING_UNFINISHED] v=1 pid=1 tid=1 inv=0 depth=0 name=a "
                               "ts=5 reason=owner_died \n", &why));
  const auto deeper = parse_unfinished(
      "[SPANRING_UNFINISHED] v=1 pid=1 tid=2 undescribed=3 reason=owner_died_deeper_than_8\n",
      &why);
  REQUIRE_MESSAGE(deeper.has_value(), why);
  CHECK(deeper->undescribed == 3);

  // Every summary field is compared. threads counts ring owners, which may exceed the distinct
  // (pid, tid) of the file (the kernel reuses tids), never fall below them.
  for (int field = 0; field < 5; ++field) {
    Summary s = good_summary();
    uint64_t* f[] = {&s.written, &s.dropped, &s.unfinished, &s.processes, &s.threads};
    if (field == 4) *f[field] -= 1;
    else *f[field] += 1;
    CHECK_MESSAGE(!problems_of(kGood, s).empty(), "summary field ", field, " not compared");
  }
  // The `wrote` line.
  CHECK_FALSE(invariant_problems(scan_text(kGood), good_summary(),
                                 "spanring: wrote 2 records to /tmp/x.strace\n", kOut)
                  .empty());
  CHECK_FALSE(invariant_problems(scan_text(kGood), good_summary(), "", kOut).empty());
}

TEST_CASE("the checker rejects a span before its anchor, two anchors, and inconsistent drops") {
  // Span of pid 300 without an anchor.
  CHECK_FALSE(problems_of(kGood + "[STRACE] v=1 pid=300 tid=300 inv=0 hid=0 depth=0 name=x "
                                  "ts=1 dur=1 \n",
                          [] {
                            Summary s = good_summary();
                            s.written = 4;
                            s.processes = 3;
                            s.threads = 3;
                            return s;
                          }())
                  .empty());
  // A second anchor of pid 100.
  CHECK_FALSE(problems_of(kGood + "[mono_ns=1000][T0x64][TIMING] clock_anchor: [CLOCK_ANCHOR] "
                                  "v=1 pid=100 mono_ns=1000 wall_ns=5\n",
                          good_summary())
                  .empty());
  // A host span that starts before its pid's anchor.
  CHECK_FALSE(problems_of(kGood + "[mono_ns=1500][T0x64][TIMING] emit_host_span: [STRACE] v=1 "
                                  "pid=100 tid=100 inv=0 hid=0 depth=0 name=a.b ts=999 dur=501 \n",
                          [] {
                            Summary s = good_summary();
                            s.written = 4;
                            return s;
                          }())
                  .empty());
  // dropped= that does not match the seq range; a segment-wide line with a seq range.
  CHECK_FALSE(problems_of(kGood + "[SPANRING_DROPS] v=1 pid=100 tid=100 dropped=2 first_seq=5 "
                                  "last_seq=5 reason=ring_full\n",
                          [] {
                            Summary s = good_summary();
                            s.dropped = 7;
                            return s;
                          }())
                  .empty());
  CHECK_FALSE(problems_of(kGood + "[SPANRING_DROPS] v=1 pid=0 tid=0 dropped=1 first_seq=1 "
                                  "last_seq=1 reason=no_ring\n",
                          [] {
                            Summary s = good_summary();
                            s.dropped = 6;
                            return s;
                          }())
                  .empty());
}

}  // TEST_SUITE
