// The drainer's commands, `spanring run`, `spanring drain` and `spanring clean`, as functions
// the CLI (drain/main.cpp) calls with its parsed arguments. Each writes its messages to stderr
// and returns the process exit status; they install SIGINT/SIGTERM handlers and (run) make the
// process a child subreaper, so they are for the CLI's main thread only. Errors that stop a
// command before it drains (a segment or file that cannot be opened) are thrown as Error.
#pragma once

#include "drain/output_files.h"

#include <spanring/segment.h>

#include <string>
#include <vector>

namespace spanring {

// What the operator asks of tracing itself and of its output file, for `run` and `drain`.
struct TracingPolicy {
  // Fail (exit 2 before the command starts, or before any tail moves) rather than run the
  // command untraced when no segment can be created, or write with write(2) when io_uring is
  // unavailable.
  bool require_tracing = false;
  // Exit kLossExitStatus when records were dropped or could not be written (and, for `run`,
  // the command itself exited 0): a job that must not lose trace data can tell.
  bool fail_on_loss = false;
  // The live status line on a terminal (drain/status_line.h); --no-status turns it off.
  bool status_line = true;
  // Overwrite an existing output file; without it a regular, non-empty one is kept as FILE.old
  // (keep_existing, tools/cli_util.h). `drain` never moves the file this segment's killed
  // drainer wrote: it resumes that one.
  bool force = false;
  // Bounds on the output (--max-size, --rotate; drain/output_files.h). Records kept out of a
  // full file are a loss (reason max_size) like any drop.
  OutputLimits limits;
};
// The exit status of --fail-on-loss: 3 (1 is a failed write, 2 a usage or setup error).
inline constexpr int kLossExitStatus = 3;

// `spanring run --flight-recorder SIZE` (drain/flight_recorder.h): keep the newest `bytes` of
// the binary trace in memory and write snapshots only (0 = off: write the trace file).
struct FlightOptions {
  uint64_t bytes = 0;
  // Also take a snapshot when the command exits normally (it always gets one when a signal
  // kills it).
  bool snapshot_at_exit = false;
};

// Creates a segment, runs `cmd` with SPANRING_SEGMENT set and drains into `out_path` (empty:
// spanring-<pid>.strace, or .sptrace for binary; "-": stdout, and `cmd`'s own stdout then goes
// to spanring's stderr so that it cannot mix into the trace) in `format` ("strace" or
// "binary"), plus
// [STRACE] text into `also_path` when not empty, until `cmd` and all its descendants exit.
// Returns `cmd`'s exit status (128 + signal when killed, 127 when it cannot be started).
// The workload is never stopped for the tracer's sake: without io_uring the output is written
// with write(2) (same bytes), and when the segment cannot be created (no room in /dev/shm,
// say) `cmd` runs untraced; one stderr line says which. policy.require_tracing makes either an
// Error thrown before `cmd` starts; policy.fail_on_loss turns a loss into kLossExitStatus when
// `cmd` exited 0.
//
// With flight.bytes != 0 (format must be "binary", no `also_path`): nothing is written until a
// snapshot is asked for: SIGUSR1, `spanring snapshot` (cmd_snapshot), `cmd` killed by a signal,
// or its exit with flight.snapshot_at_exit. Snapshots are named <base>.snap-<n>.sptrace, where
// <base> is `out_path` without a trailing .sptrace (default spanring-<pid>) and n counts from 1.
int cmd_run(std::string out_path, const std::string& format, const std::string& also_path,
            const SegmentOptions& opts, const std::vector<std::string>& cmd,
            const TracingPolicy& policy, const FlightOptions& flight = {});

// `spanring snapshot --segment NAME [-o FILE]`: asks the flight-recording drainer of segment
// `segment_name` for a snapshot into `out_path` (empty: its default name), waits until it is
// written and prints its path on stdout. Returns 0; 1 when there is no flight-recording
// drainer or the snapshot failed (said on stderr). Throws Error when the segment cannot be
// opened.
int cmd_snapshot(const std::string& segment_name, const std::string& out_path);

// Attaches to segment `segment_name` and drains into `out_path` ("-": stdout) until
// SIGINT/SIGTERM, then drains what is left. Resumes a file a killed drainer left (the file the
// segment says it was drained into, by device and inode): keeps its committed part and
// follows its format (`format` empty: that format, else strace; a different one throws
// Error kInvalidArgument). Without io_uring it writes with write(2) (one stderr line), unless
// policy.require_tracing, which throws Error kUnsupported before any tail moves. Returns 0, 1
// when a write failed, or kLossExitStatus when records were lost and policy.fail_on_loss.
int cmd_drain(const std::string& segment_name, const std::string& out_path, std::string format,
              const std::string& also_path, const TracingPolicy& policy);

// Removes the segments in /dev/shm whose creator, drainer and ring owners are all dead (only
// says so when `dry_run`); never a live one. Returns 0.
int cmd_clean(bool dry_run);

}  // namespace spanring
