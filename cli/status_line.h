// The live status line of `spanring run` and `spanring drain` on a terminal: records written,
// records/s over the last update, and drops, redrawn in place on stderr about once a second,
// and erased before the summary, so that what stays on the screen is the summary alone.
//
// On only when stderr is a terminal (isatty(2)): a file or a pipe (a log, CI) never gets it.
// `--no-status` or SPANRING_NO_STATUS=1 (any value but "" and "0") turns it off on a terminal
// too.
//
// It is also the sink of the diagnostics channel (drain/diagnostics.h) while a drain runs: a
// message from the drainer, the writer threads or the flight recorder erases the line first and
// gets a line of its own; the next update() draws the status line again. update() and erase()
// are called by the drain thread, write() by any thread: one mutex orders them.
#pragma once

#include "drain/diagnostics.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace spanring {

class StatusLine final : public DiagnosticSink {
 public:
  // Redraws are at least this far apart (the drainer offers one every ~100 ms).
  static constexpr std::chrono::milliseconds kInterval{1000};

  // Whether the line should be shown: stderr is a terminal, `allowed` (no --no-status) and
  // SPANRING_NO_STATUS does not turn it off.
  static bool wanted(bool allowed) noexcept;

  explicit StatusLine(bool enabled) noexcept;
  ~StatusLine() { erase(); }
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  // Redraws the line when kInterval has passed since the last redraw (the first one
  // kInterval after construction): `written` and `dropped` are running totals.
  void update(uint64_t written, uint64_t dropped);
  // Erases the line (carriage return, erase to end of line) if one is shown; the next
  // update() draws it again. Call before printing anything else on stderr.
  void erase() noexcept;

  bool enabled() const noexcept { return enabled_; }
  // A diagnostics message: erases the line, then writes `line` to stderr.
  void write(std::string_view line) noexcept override;

  // The text of one redraw (without the terminal controls), for tests.
  static std::string text(uint64_t written, uint64_t dropped, double records_per_s);

 private:
  void erase_locked() noexcept;

  std::mutex mutex_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
  uint64_t last_written_ = 0;
};

}  // namespace spanring
