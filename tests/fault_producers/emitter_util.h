// Small helpers shared by the fault emitters (the programs the fault tests run under
// `spanring run`). Header-only: each emitter is one .cpp file plus this.
//
// Results go to a JSON Lines file shared by every process of a run: each process appends whole
// lines with one write(2) on an O_APPEND descriptor, which the kernel serialises against other
// appends to the same file, so lines of different processes never interleave.
#pragma once

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fault_emitter {

inline pid_t gettid_now() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Prints `<prog>: <message>` on stderr and exits 1 (the test reports the emitter's stderr).
[[noreturn]] __attribute__((format(printf, 1, 2))) inline void fail(const char* fmt, ...) {
  std::fprintf(stderr, "fault emitter (pid %d): ", static_cast<int>(::getpid()));
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::exit(1);
}

// Appends `j` as one line to `path` with a single write(2); exits 1 when that fails.
inline void append_json_line(const std::string& path, const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail("open %s: %s", path.c_str(), std::strerror(errno));
  const ssize_t n = ::write(fd, line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) {
    fail("write %s: %zd of %zu bytes (%s)", path.c_str(), n, line.size(), std::strerror(errno));
  }
  ::close(fd);
}

}  // namespace fault_emitter
