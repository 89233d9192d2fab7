// What every `spanring` command does the same way with its output file and its exit status, so
// that a new command (or option) gets the conventions by calling these rather than by copying
// them:
//
//   -o -          stdout. Commands that write through a path (run and drain open it with
//                 UringWriter) use writer_path(); the ones that write through TraceOutput use
//                 OutputFile, which knows "-".
//   FILE exists   a regular, non-empty FILE is kept as FILE.old (an older FILE.old is replaced),
//                 as `perf record` does, unless --force; a FIFO, a device (/dev/null) or an
//                 empty file is written in place. keep_existing() does this for run and drain;
//                 OutputFile does it on commit.
//   rejected      a command that rejects its input (exit kExitFailed) leaves no output file
//                 behind and an existing FILE untouched: OutputFile writes a temporary file in
//                 FILE's directory and renames it over FILE only on commit().
//
// Cold path, the CLI's main thread. Errors are thrown as spanring::Error (with errno and path).
#pragma once

#include "format/convert_io.h"

#include <string>

namespace spanring {

// Exit statuses shared by every command (`spanring run` passes on its command's instead;
// --fail-on-loss's 3 is kLossExitStatus in cli/drain_session.h).
inline constexpr int kExitOk = 0;
// The command ran and failed: a rejected input (not a trace, corrupt, empty), a failed write.
inline constexpr int kExitFailed = 1;
// A usage error (cli/usage.h) or a setup error (a file or segment that cannot be opened).
inline constexpr int kExitUsage = 2;

// Whether `path` asks for stdout ("-").
inline bool is_stdout_path(const std::string& path) { return path == "-"; }

// The path a writer that opens its output by name should open: "/dev/stdout" for "-", else
// `path`. Reopening fd 1 through /dev/stdout (a link to /proc/self/fd/1) gives UringWriter the
// pipe, terminal or file stdout is, with its existing handling of non-regular files (no offsets,
// no fsync); it fails only for a socket (ENXIO), which is then reported like any open error.
// Rejected: a second UringWriter constructor taking fd 1, for that one case.
std::string writer_path(const std::string& path);

// What a user reads for `path` in messages: "stdout" for "-", else `path`.
std::string shown_path(const std::string& path);

// Whether `in` holds no byte at all. convert and report both refuse such an input as "not a
// trace: it is empty" (exit kExitFailed): an empty file is what a failed or untraced run
// leaves, and no command should turn it into an empty-looking success.
bool is_empty_input(TraceInput& in);

// Keeps an existing output before it is overwritten: when `path` is a regular file holding at
// least one byte and `force` is false, renames it to `path`.old (replacing an older one) and
// returns that name; otherwise (no such file, empty, not a regular file, "-", force) returns ""
// and leaves it alone. Throws Error when the rename fails, and (kInvalidArgument) for a
// symbolic link to a non-empty regular file, which it cannot keep.
std::string keep_existing(const std::string& path, bool force);

// The output of a command that may reject its input (convert, report). Writes to stdout for ""
// or "-", in place for a path that exists and is not a regular file (a FIFO, /dev/null), and
// otherwise to a temporary file `.NAME.XXXXXX` in the directory of `path` (mode 0644 before the
// umask, as TraceOutput::open), renamed to `path` by commit(). Not copyable or movable.
class OutputFile {
 public:
  // Throws Error when the temporary (or in-place) file cannot be created.
  OutputFile(const std::string& path, bool force);
  ~OutputFile();  // discard() unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  TraceOutput& out() noexcept { return out_; }
  // Flushes and closes the output, keeps an existing `path` as `path`.old (unless `force`) and
  // renames the temporary file to `path`. Returns the .old name kept, or "". Throws Error when
  // a write, the close or a rename failed (the temporary file is removed then).
  std::string commit();
  // Removes the temporary file; an existing `path` is left as it was. Never throws. What was
  // already written to stdout or to a FIFO stays written.
  void discard() noexcept;

 private:
  std::string path_;
  std::string temp_;  // empty: writing to stdout or in place
  bool force_;
  bool done_ = false;
  TraceOutput out_;
};

}  // namespace spanring
