// `spanring snapshot`: asks the flight recorder of a segment (spanring run --flight-recorder)
// for a snapshot, over the segment's snapshot socket (drain/snapshot_control.h).
#include "cli/commands.h"
#include "cli/drain_session.h"
#include "drain/snapshot_control.h"

#include <spanring/error.h>

#include <cstdio>
#include <memory>
#include <string>

namespace spanring {
namespace {

// Asks the flight-recording drainer of segment `segment_name` for a snapshot into `out_path`
// (empty: its default name), waits until it is written and prints its path on stdout. Returns
// 0; 1 when there is no flight-recording drainer or the snapshot failed (said on stderr).
// Throws Error when the segment cannot be opened.
int take_snapshot(const std::string& segment_name, const std::string& out_path) {
  try {
    std::printf("%s\n", request_snapshot(segment_name, out_path.empty() ? "" : absolute(out_path))
                            .c_str());
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const Error& e) {
    // No flight recorder, or the snapshot failed: 1. A segment that cannot be opened: the
    // CLI's setup error (2).
    if (e.code() != ErrorCode::kUnsupported && e.code() != ErrorCode::kSystem) throw;
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return 1;
  }
}


struct SnapshotOptions {
  std::string segment;
  std::string out_path;
};

}  // namespace

Command add_snapshot_command(CLI::App& app) {
  auto o = std::make_shared<SnapshotOptions>();
  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "Ask the flight recorder (spanring run --flight-recorder) of a segment for a "
                  "snapshot of its window, wait until it is written and print its path; exits 1 "
                  "when the segment has no flight-recording drainer");
  snapshot->add_option("--segment", o->segment, "Segment name (the value of SPANRING_SEGMENT)")
      ->required();
  snapshot->add_option("-o,--output", o->out_path,
                       "Snapshot file (default: the recorder's <base>.snap-<n>.sptrace)");
  return {snapshot, [o] { return take_snapshot(o->segment, o->out_path); }};
}

}  // namespace spanring
