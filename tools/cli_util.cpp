#include "tools/cli_util.h"

#include <spanring/error.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace spanring {
namespace {

bool is_regular(const std::string& path, struct stat* st) {
  return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode);
}

// Where OutputFile writes `path` before commit: "" for stdout or in place, else a new empty
// temporary file next to `path` (same file system, so that rename() is atomic).
std::string make_temp(const std::string& path) {
  if (path.empty() || is_stdout_path(path)) return "";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return "";  // FIFO, device
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temp = dir + "." + base + ".XXXXXX";
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot create output " + path + " (temporary file " + temp + "): " +
                    std::strerror(errno),
                errno, path);
  // mkstemp creates 0600; the output gets what TraceOutput::open would have given it.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  (void)::fchmod(fd, 0644 & ~mask);
  ::close(fd);
  return temp;
}

}  // namespace

std::string writer_path(const std::string& path) {
  return is_stdout_path(path) ? "/dev/stdout" : path;
}

std::string shown_path(const std::string& path) {
  return is_stdout_path(path) ? "stdout" : path;
}

bool is_empty_input(TraceInput& in) { return in.peek(1).empty(); }

std::string keep_existing(const std::string& path, bool force) {
  struct stat st {};
  if (force || is_stdout_path(path) || !is_regular(path, &st) || st.st_size == 0) return "";
  // A symbolic link to a file that holds something (/dev/stdout appending to a file, say):
  // renaming would move the link, not the file, and writing through it would empty the file.
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
    throw Error(ErrorCode::kInvalidArgument,
                path + " is a symbolic link to a file that is not empty, which spanring would "
                       "overwrite: give the file's own path (its old content is then kept as "
                       "FILE.old) or --force",
                EINVAL, path);
  const std::string old = path + ".old";
  if (::rename(path.c_str(), old.c_str()) != 0)
    throw Error("cannot keep the existing " + path + " as " + old + ": " + std::strerror(errno) +
                    " (--force overwrites it)",
                errno, path);
  return old;
}

OutputFile::OutputFile(const std::string& path, bool force)
    : path_(path), temp_(make_temp(path)), force_(force),
      out_(TraceOutput::open(temp_.empty() ? path : temp_)) {}

OutputFile::~OutputFile() {
  if (!done_) discard();
}

std::string OutputFile::commit() {
  done_ = true;
  try {
    out_.finish();
  } catch (...) {
    discard();
    throw;
  }
  if (temp_.empty()) return "";
  std::string old;
  try {
    old = keep_existing(path_, force_);
  } catch (...) {
    discard();
    throw;
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    discard();
    throw Error("cannot rename " + temp_ + " to " + path_ + ": " + std::strerror(err), err,
                path_);
  }
  temp_.clear();
  return old;
}

void OutputFile::discard() noexcept {
  done_ = true;
  if (temp_.empty()) return;
  try {
    out_.finish();  // closes the descriptor; the bytes are about to go anyway
  } catch (...) {
  }
  ::unlink(temp_.c_str());
  temp_.clear();
}

}  // namespace spanring
