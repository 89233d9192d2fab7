// Options more than one `spanring` command takes, registered and checked in one place so that
// every command spells and checks them alike.
#pragma once

#include "drain/output_files.h"

#include <CLI/CLI.hpp>

#include <string>

namespace spanring {

// The help of --force, for every command that writes a file.
inline constexpr const char* kForceHelp =
    "Overwrite an existing output file (default: keep it as FILE.old)";

// The help of --no-status (run, drain).
inline constexpr const char* kNoStatusHelp =
    "No live status line (records/s, drops) on stderr; it is shown only when stderr is a "
    "terminal, and SPANRING_NO_STATUS=1 turns it off too";

// Registers --max-size SIZE (into limits.max_size, as bytes) and --rotate SIZE[:COUNT] (as text
// into `rotate`, for parse_limits) of `run` and `drain` (drain/output_files.h). SIZE takes
// CLI11's size suffixes (K, M, G, ... as powers of 1024, or KB/KiB...).
void add_limit_options(CLI::App* cmd, OutputLimits& limits, std::string& rotate);

// Completes `limits` after parsing: fills limits.rotate_* from --rotate's text (when given) and
// checks the limits as a whole (check_limits). Throws Error (kInvalidArgument) on a bad value.
void parse_limits(const std::string& rotate, OutputLimits& limits);

}  // namespace spanring
