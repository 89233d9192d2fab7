// A full disk: the trace goes to a 1 MiB tmpfs while the deterministic workload produces ~4 MB.
// The drainer must report ENOSPC once, keep draining (the producer's ring keeps moving after the
// failure, so the producer never stalls on a dead writer), exit when the command does, and say
// in its summary that fewer records were written than emitted, with the rest counted as
// unwritten. The file must end at a line boundary, every line must parse, and every line must be
// one the plain writer expects, in order (failed buffers leave out whole lines, nothing else).
// Skipped (77) where mounting a tmpfs is not permitted.
#include "det_expect.h"
#include "det_workload.h"
#include "fault_util.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 30;
constexpr uint64_t kRecords = 20000;  // ~4 MB of text, four times the file system
constexpr const char* kPaceUs = "100";  // >= 2 s of emitting: the failure comes early in it

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string::npos ? text.size() : end + 1;
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("on a full disk the drainer reports ENOSPC once, keeps draining, ends at a line boundary and counts what it could not write") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_DET_EMITTER");
  TempDir tmp;
  const std::string mnt = tmp.file("full");
  TmpfsMount mount(mnt, "1m");
  const std::string out = mnt + "/out.strace";
  const std::string json = tmp.file("det.json");
  const std::string err = tmp.file("run.err");
  // 4096-slot rings hold a few hundred ms of the workload: the drainer must keep draining after
  // the failure for the producer not to drop.
  BackgroundDrainer drainer({{spanring, "run", "--rings", "4", "--ring-records", "4096", "-o",
                              out, "--", emitter, "--out", json, "--count",
                              std::to_string(kRecords), "--pace-us", kPaceUs},
                             {}, "", err},
                            kWaitS);
  const pid_t pid = drainer.pid();
  const std::string& segment = drainer.segment();
  INFO("spanring run stderr:\n", slurp(err));
  ShmView view;
  REQUIRE(view.open(segment, false));
  int64_t ring = -1;
  REQUIRE_MESSAGE(wait_until(
                      [&] {
                        for (uint32_t i = 0; i < view.header().ring_count; ++i)
                          if (view.ring(i).state.load() == spanring::kRingActive) ring = i;
                        return ring >= 0;
                      },
                      kWaitS),
                  "the producer never claimed a ring");
  const spanring::RingHeader& r = view.ring(static_cast<uint32_t>(ring));

  // The failure, then the ring keeps moving while the producer still emits.
  const bool failed = wait_until(
      [&] { return slurp(err).find(std::strerror(ENOSPC)) != std::string::npos; }, kWaitS);
  REQUIRE_MESSAGE(failed, "no ENOSPC report although the output outgrew the file system");
  const uint64_t tail_at_failure = r.tail.load();
  const bool moving = wait_until(
      [&] { return r.tail.load() >= tail_at_failure + 1000 || r.state.load() != spanring::kRingActive; },
      kWaitS);
  const bool producer_running = r.state.load() == spanring::kRingActive;
  CHECK_MESSAGE((moving && producer_running), "after ENOSPC the drainer stopped draining: the "
                "ring's tail stayed at ", tail_at_failure, " (now ", r.tail.load(), ")");

  const Exit e = wait_exit(pid, kWaitS);
  drainer.release();
  const std::string err_text = slurp(err);
  INFO("spanring run stderr (final):\n", err_text);
  REQUIRE_MESSAGE((!e.timed_out && e.sig == 0), "spanring run: ", e.describe());
  CHECK_MESSAGE(e.code == 0, "spanring run exits with its command's status (README); got ",
                e.describe());

  // ENOSPC reported exactly once.
  size_t reports = 0;
  std::istringstream lines(err_text);
  for (std::string l; std::getline(lines, l);)
    reports += l.find(std::strerror(ENOSPC)) != std::string::npos ? 1 : 0;
  CHECK_MESSAGE(reports == 1, "ENOSPC reported on ", reports, " lines (want once)");

  // The summary: written < emitted, the rest counted.
  const nlohmann::json det = nlohmann::json::parse(spanring_test::read_file(json));
  const uint64_t det_pid = det.at("pid").get<uint64_t>();
  const uint64_t det_tid = det.at("tid").get<uint64_t>();
  const uint64_t invalid = 2 * (kRecords / det::kKinds);
  const uint64_t spans = kRecords - invalid;
  const auto written = summary_value(err_text, "written");
  const auto dropped = summary_value(err_text, "dropped");
  // Either `unwritten=N` on the summary line or its own `spanring: unwritten: N ...` line.
  std::optional<uint64_t> unwritten = summary_value(err_text, "unwritten");
  if (!unwritten) {
    const auto l = lines_starting(err_text, "spanring: unwritten: ");
    if (l.size() == 1) unwritten = std::strtoull(l[0].c_str() + 21, nullptr, 10);
  }
  REQUIRE((written && dropped));
  CHECK_MESSAGE(*written < spans, "written=", *written, " of ", spans, " spans on a 1 MiB disk");
  CHECK_MESSAGE(unwritten.has_value(), "the summary does not report the records it could not "
                "write (no unwritten=N): written=", *written, " dropped=", *dropped, " of ",
                kRecords, " records emitted");
  if (unwritten) {
    CHECK_MESSAGE(*written + *dropped + *unwritten == kRecords, "written ", *written,
                  " + dropped ", *dropped, " + unwritten ", *unwritten, " != emitted ", kRecords);
  }

  // The file: whole lines that parse, each one the plain writer expects, in order.
  const std::string text = slurp(out);
  MESSAGE("the full disk holds ", text.size(), " bytes of trace");
  const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, "full disk");
  check_anchors(parsed, {}, "full disk");
  uint64_t span_lines = 0;
  spanring_test::AnchorLine anchor;
  for (const auto& l : parsed.lines) {
    if (l.kind == spanring_test::LineKind::kSpan) ++span_lines;
    if (l.kind == spanring_test::LineKind::kAnchor) anchor = l.anchor;
  }
  CHECK_MESSAGE(span_lines == *written, "the file holds ", span_lines,
                " [STRACE] lines, the summary says written=", *written);
  const std::vector<std::string> want = split_lines(det::expected_trace(det_pid, det_tid, kRecords, anchor));
  size_t w = 0;
  size_t unexpected = 0;
  std::string first;
  for (const std::string& l : split_lines(text)) {
    // A ring that overflowed while the machine was busy: legitimate, and accounted above.
    if (l.rfind("[SPANRING_DROPS] ", 0) == 0 && l.find(" reason=ring_full\n") != std::string::npos)
      continue;
    size_t k = w;
    while (k < want.size() && want[k] != l) ++k;
    if (k == want.size()) {
      if (unexpected++ == 0) first = spanring_test::printable(l, 300);
      continue;
    }
    w = k + 1;
  }
  CHECK_MESSAGE(unexpected == 0, unexpected, " line(s) of the file are not the plain writer's "
                "lines in order; first: ", first);
}

}  // TEST_SUITE
