// The one channel through which the drainer's libraries (the Drainer, the writer, the output
// files, the flight recorder) tell the operator something while a drain runs: a quarantined
// ring, a failed write, a rotation that failed, a snapshot written. They never print to stderr
// themselves; they call report(), which hands the line to the sink the command line installed.
//
// Why a channel: `spanring run` and `drain` draw a live status line on a terminal, and a
// message must never land glued onto it. The command line's sink (StatusLine, cli/) erases the
// line first; a test installs a sink of its own and reads the messages without parsing stderr.
// With no sink installed, messages go to stderr as they are.
//
// Thread-safe: the writer threads report too. A sink is called from whichever thread reports,
// so it serialises its own output.
#pragma once

#include <string_view>

namespace spanring {

// Receives the messages. `line` is one complete message ending in '\n' ("spanring: ...").
class DiagnosticSink {
 public:
  virtual ~DiagnosticSink() = default;
  virtual void write(std::string_view line) noexcept = 0;
};

// Formats one message (printf-style; the caller writes the "spanring: " prefix and the
// newline) and hands it to the installed sink, or to stderr when none is installed.
void report(const char* format, ...) noexcept __attribute__((format(printf, 1, 2)));

// Installs `sink` as the channel's sink while the scope lives, and puts the previous one back
// when it ends. Scopes nest (last in, first out); the sink must outlive its scope. Install and
// end them on one thread while no other thread reports (before draining starts, after the
// writers have stopped), as the command line does.
class DiagnosticsScope {
 public:
  explicit DiagnosticsScope(DiagnosticSink& sink) noexcept;
  ~DiagnosticsScope();
  DiagnosticsScope(const DiagnosticsScope&) = delete;
  DiagnosticsScope& operator=(const DiagnosticsScope&) = delete;

 private:
  DiagnosticSink* previous_;
};

}  // namespace spanring
