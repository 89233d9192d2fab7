// /proc liveness checks (src/proc.h).
#include "src/proc.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace spanring {

namespace {

// Field 22 (starttime) of a /proc .../stat file, or 0 when it cannot be read, or when
// `reject_exited` and field 3 (state) says the task has exited (Z or X).
uint64_t stat_start_time(const char* path, bool reject_exited) noexcept {
  // open/read/close rather than stdio: the producer calls this from its fork handler and it
  // must stay async-signal-safe (no malloc).
  // Through a /proc directory fd and a relative path, not open(path): qemu-user rewrites an
  // open of "/proc/self/stat" or "/proc/<own pid>/stat" with a starttime of its own (measured:
  // 2 ticks off the kernel's), so an emulated producer's own start time would not match what
  // the drainer reads for it and its rings would look orphaned. openat with a relative path
  // reaches the kernel's file under qemu-user too; natively it is the same file.
  const int proc = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return 0;
  const char* rel = std::strncmp(path, "/proc/", 6) == 0 ? path + 6 : path;
  const int fd = ::openat(proc, rel, O_RDONLY | O_CLOEXEC);
  ::close(proc);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // Field 2 (comm) may hold spaces and ')': fields resume after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  ++p;
  if (reject_exited && p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X')) return 0;
  // After ')' come fields 3.. each preceded by one space; starttime is field 22.
  for (int field = 2; field < 22 && *p != '\0'; ++p)
    if (*p == ' ') ++field;
  uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + static_cast<uint64_t>(*p - '0');
  return v;
}

}  // namespace

uint64_t process_start_time(uint32_t pid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  // The leader shows Z once the main thread has exited, even while other threads run: a
  // process is gone only when no thread of it is left.
  uint64_t start = stat_start_time(path, true);
  if (start != 0) return start;
  start = stat_start_time(path, false);
  if (start == 0) return 0;
  std::snprintf(path, sizeof path, "/proc/%u/status", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[2048];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* t = std::strstr(buf, "\nThreads:");
  if (t == nullptr) return 0;
  t += 10;
  while (*t == ' ' || *t == '\t') ++t;
  return *t >= '2' || (*t == '1' && t[1] >= '0' && t[1] <= '9') ? start : 0;
}

bool thread_alive(uint32_t pid, uint32_t tid, uint64_t start_time) noexcept {
  char path[96];
  std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  // The pid names the same process (not a reused pid) ...
  if (start_time == 0 || stat_start_time(path, false) != start_time) return false;
  // ... and the owner thread itself has not exited.
  return task_alive(pid, tid);
}

bool task_alive(uint32_t pid, uint32_t tid) noexcept {
  char path[96];
  std::snprintf(path, sizeof path, "/proc/%u/task/%u/stat", pid, tid);
  return stat_start_time(path, true) != 0;
}

}  // namespace spanring
