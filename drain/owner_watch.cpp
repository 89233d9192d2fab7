// OwnerWatch (drain/owner_watch.h): ring owners' liveness, once per process per round.
#include "drain/owner_watch.h"

#include "src/proc.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace spanring {

OwnerWatch::OwnerWatch() noexcept : pidfd_limit_(kMaxPidfds) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
      files.rlim_cur / 4 < pidfd_limit_)
    pidfd_limit_ = static_cast<size_t>(files.rlim_cur / 4);
}

OwnerWatch::~OwnerWatch() {
  for (auto& [pid, p] : procs_)
    if (p.pidfd >= 0) ::close(p.pidfd);
}

void OwnerWatch::close_pidfd(Process& p) noexcept {
  if (p.pidfd < 0) return;
  ::close(p.pidfd);
  p.pidfd = -1;
  --pidfds_open_;
}

void OwnerWatch::look(uint32_t pid, Process& p) noexcept {
  p.checked = round_;
  if (p.pidfd >= 0) {
    // A pidfd is readable once the process has no thread left (a zombie included): the same
    // death process_start_time() sees, without a /proc read.
    pollfd f{p.pidfd, POLLIN, 0};
    const int n = ::poll(&f, 1, 0);
    if (n >= 0) {
      p.alive = n == 0;
      return;
    }
  }
  p.alive = process_start_time(pid) == p.start_time;
}

bool OwnerWatch::alive(uint32_t pid, uint32_t tid, uint64_t start_time) noexcept {
  if (start_time == 0) return false;  // never recorded: no process can be shown to be it
  auto it = procs_.find(pid);
  if (it == procs_.end() || it->second.start_time != start_time) {
    // First sight of this process (or the pid now names another owner's process): open a
    // pidfd first, then compare the start time. The pidfd pins whatever process held the pid
    // at the open; if its start time is the owner's, that process is the owner, and a reuse
    // of the pid later cannot change what the pidfd watches.
    if (it != procs_.end()) {
      close_pidfd(it->second);
    } else {
      it = procs_.emplace(pid, Process{}).first;
    }
    Process& fresh = it->second;
    fresh = Process{};
    fresh.start_time = start_time;
    // The raw syscall: glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage for
    // C++. ENOSYS, EPERM (seccomp), EMFILE...: -1, and /proc is read instead.
    if (pidfds_open_ < pidfd_limit_) {
      fresh.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
      if (fresh.pidfd >= 0) ++pidfds_open_;
    }
    fresh.checked = round_;
    fresh.alive = process_start_time(pid) == start_time;
    if (!fresh.alive) close_pidfd(fresh);
  }
  Process& p = it->second;
  p.seen = round_;
  if (p.alive && p.checked != round_) look(pid, p);  // a dead process stays dead
  if (!p.alive) return false;
  if (tid != pid) {
    // Signal 0 checks that thread tid exists in thread group pid, and sends nothing. A thread
    // that exited is gone at once (only a leader lingers as a zombie). EPERM: it exists. Once
    // every kThreadRounds rounds per thread, staggered by tid: a thread that exits the usual
    // way releases its ring itself, so this only finds one that skipped its exit handlers.
    if ((round_ + tid) % kThreadRounds != 0) return true;
    if (::syscall(SYS_tgkill, static_cast<pid_t>(pid), static_cast<pid_t>(tid), 0) == 0)
      return true;
    return errno != ESRCH;
  }
  // The leader thread: a zombie while the other threads run, which only /proc shows. Read once
  // every kLeaderRounds rounds per process, staggered by pid so the reads spread over rounds.
  if (!p.leader_exited && (round_ + pid) % kLeaderRounds == 0)
    p.leader_exited = !task_alive(pid, pid);
  return !p.leader_exited;
}

void OwnerWatch::end_round() noexcept {
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (it->second.seen == round_) {
      ++it;
      continue;
    }
    close_pidfd(it->second);
    it = procs_.erase(it);
  }
}

}  // namespace spanring
