// The `spanring` process' own signals and the processes it starts: the one SIGINT/SIGTERM
// handler every command installs, SIGUSR1 (a snapshot request, or refused), starting the traced
// command and reaping it and every descendant `spanring run` adopts as their subreaper.
//
// Main thread of the CLI only: the handlers write process-wide flags, and the traced command's
// pid is one process-wide value.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace spanring {

// Installs the SIGINT/SIGTERM handler: it records the signal (stop_signal()) and, while a
// command started by start_command() runs, forwards the signal to it (`run` keeps draining until
// the command exits). No SA_RESTART: a sleep or a blocking read ends early, so a loop that
// waits notices the stop at once.
void install_stop_handlers();

// Ignores SIGPIPE in this process, so that a drainer whose output is a pipe (`-o -`) whose
// reader went away gets EPIPE from its write, reports it and goes on counting the records as
// unwritten, instead of being killed with the trace's summary unwritten and the traced command
// orphaned. The traced command still starts with SIGPIPE as this process had it (start_command
// resets it to the default action when it was that). Called by `run` and `drain`.
void ignore_sigpipe();

// The SIGINT or SIGTERM received since install_stop_handlers(), or 0.
int stop_signal() noexcept;

// SIGUSR1 asks a flight-recording `spanring run` for a snapshot: counted, so none is lost when
// several arrive between two looks at snapshot_signals().
void install_snapshot_handler();
// How many SIGUSR1 arrived since install_snapshot_handler().
int snapshot_signals() noexcept;

// A drainer that writes a file has no window to snapshot: SIGUSR1 (whose default action would
// end it, and tracing with it) is refused with one line on stderr.
void refuse_snapshot_signal();

// Starts `cmd` with this process' environment, SPANRING_SEGMENT set to `segment` (or removed
// when `segment` is empty), and with its stdout on our stderr when `stdout_to_stderr` (the trace
// goes to our stdout). Returns its pid, or 0 after saying on stderr why it could not start.
pid_t start_command(const std::vector<std::string>& cmd, const std::string& segment,
                    bool stdout_to_stderr = false);

// Reaps every exited descendant without waiting (spanring is their subreaper). When `child` (the
// traced command) is among them: its wait status into `status`, `child_done` set, returns true.
// `all_done` once no descendant is left.
bool reap_descendants(pid_t child, int& status, bool& child_done, bool& all_done);

// The exit status `spanring run` passes on for a waitpid status: the command's own, 128 + the
// signal that killed it.
int exit_status(int status);

// Runs `cmd` untraced (the segment could not be created): signals are passed on as in a traced
// run. Returns the command's exit status (127 when it cannot be started).
int run_untraced(const std::vector<std::string>& cmd);

}  // namespace spanring
