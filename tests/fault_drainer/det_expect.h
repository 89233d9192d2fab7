// The test's own writer of the lines the drainer must produce for det_workload.h, written from
// shared/strace-format.md (encoding, truncation, line layout) and spanring's documented choices
// (the prefix's E = ts + dur and P = the tid in hex; drop lines as in README.md), not from the
// drainer's code. It writes with plain synchronous write(2) calls: the reference that io_uring
// output under faults must equal byte for byte.
#pragma once

#include "mp_util.h"
#include "strace_parser.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace det {

// Encodes a raw name (`name` true) or attribute field: copy printable ASCII except % [ ] (and,
// in names, space and =), %XX (uppercase) for every other byte, stop at NUL, cut at 64 / 192
// encoded bytes with whole units only, dropping the last unit when exactly at the cap, then `~`.
std::string encode_field(std::string_view raw, bool name);

// The whole expected text for records 0..count-1 emitted by (pid, tid): `anchor` (taken from the
// run's output: its values depend on when the process attached) first, then per record its
// [STRACE] line or, for a record the producer refused, its `invalid` drop line.
std::string expected_trace(uint64_t pid, uint64_t tid, uint64_t count,
                           const spanring_test::AnchorLine& anchor);

// The anchor line for `a` (prefix included).
std::string anchor_line(const spanring_test::AnchorLine& a);

// Writes `text` to `path` with open/write/fsync/close (a plain synchronous writer) and reads it
// back. FAILs the test on any error.
std::string write_plain(const std::string& path, const std::string& text);

// "" when equal, else where the first difference is (line number and both lines).
std::string first_difference(const std::string& got, const std::string& want);

// What det_emitter says it did (its --out JSON): the process and thread that emitted, and how
// many records. REQUIREs that it ran traced.
struct DetRun {
  uint64_t pid = 0;
  uint64_t tid = 0;
  uint64_t count = 0;
};
DetRun load_run(const std::string& json_path);

// The text a drainer must have written for run `d`, as the plain writer writes it (into
// <tmp>/<label>.expected): the anchor's values come from `output` (they are the process'
// attach time, checked to be there and well formed), everything else from the workload.
std::string expected_for(const DetRun& d, const std::string& output,
                         const spanring_test::TempDir& tmp, const std::string& label);

}  // namespace det
