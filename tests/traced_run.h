// Running a program under `spanring run` and collecting what the multi-process tests look at
// afterwards: the run's status and stderr, its summary line, and (for the test emitters) the
// JSON lines in which an emitter says what it emitted. The tests that trace a program to its
// end use these, so the command line and the checks that every such run must pass are
// written once. (A drainer that the test stops, kills or starves while it runs is started with
// fault_util.h's BackgroundDrainer instead.)
#pragma once

#include "mp_util.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace spanring_test {

// Runs `$SPANRING_EXE run -o <out> <run_options...> -- <command...>` with run_process (own
// process group, stdout and stderr captured, the group SIGKILLed after `timeout_s` seconds).
// It checks nothing about the run: for the tests whose runs may fail or skip on purpose; the
// others want run_traced.
RunResult spanring_run(const std::string& out, const std::vector<std::string>& run_options,
                       const std::vector<std::string>& command, int timeout_s);

struct TracedRun {
  std::string out;  // the trace file (-o)
  RunResult run;    // `spanring run`'s status, stdout and stderr
  Summary summary;  // its `spanring: summary:` line
};

// spanring_run, then REQUIREs, each failure showing the run's status and stderr: the run did
// not time out; it exited 0 (`spanring run` exits with its command's status, so the command did
// too); its stderr holds exactly one well-formed summary line (parse_summary).
TracedRun run_traced(const std::string& out, const std::vector<std::string>& run_options,
                     const std::vector<std::string>& command, int timeout_s);

struct EmitterRun : TracedRun {
  std::string jsonl;                    // the emitter's --out file
  std::vector<nlohmann::json> emitted;  // its lines, parsed (read_jsonl)
};

// run_traced of a test emitter, the executable named by environment variable `emitter_var`
// (exe_from_env), as `<emitter> --out <tmp>/emitted.jsonl <emitter_args...>`, traced into
// <tmp>/out.strace; then reads the JSON lines the emitter appended to its --out file.
EmitterRun run_emitter(const TempDir& tmp, const char* emitter_var,
                       const std::vector<std::string>& run_options,
                       const std::vector<std::string>& emitter_args, int timeout_s);

// One JSON value per line (the emitters' --out files; empty lines are skipped). REQUIREs that
// the file can be read; a line that is not JSON is a failed CHECK naming the file and line.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace spanring_test
