// OwnerWatch: is a ring's owner (thread `tid` of process `pid`, started at `start_time`) still
// alive? The drainer asks it for every owned ring every ~100 ms (Drainer::check_owners), so its
// cost per check must not grow with /proc reads per ring.
//
// What it costs, per check round, with R owned rings held by P processes:
// - each process is looked at once, not once per ring: a pidfd (pidfd_open, opened when the
//   process is first seen, after which its start time is compared once, so a reused pid is
//   never mistaken for the owner) polled with timeout 0; one syscall, no /proc read. Where
//   pidfd_open is unavailable (ENOSYS, a seccomp filter) or kMaxPidfds are open, the process'
//   /proc/PID/stat start time is read instead, still once per process;
// - each non-leader thread: tgkill(pid, tid, 0), one syscall, no /proc read (ESRCH: it exited),
//   once every kThreadRounds rounds (~1 s), staggered by tid: a thread that exits normally
//   releases its ring itself (its pthread key's destructor), so the check only finds threads
//   that ended without their exit handlers, and a signal per silent thread every 100 ms was a
//   third of an idle drainer's CPU with 256 silent owners (perf, docs/performance.md);
// - a leader thread (tid == pid) that exits while the process' other threads run stays a zombie
//   that signals still reach, so only /proc/PID/task/PID/stat tells; that read is spread: each
//   process' leader once every kLeaderRounds rounds (~1 s), staggered by pid.
// The replaced check opened and read two /proc files per ring per round: ~6% of a core with 256
// silent owners (bench_drain --idle-owners 256; docs/performance.md has both numbers).
//
// Semantics are the old thread_alive()'s (src/proc.h): the owner is dead once its process has no
// thread left (a zombie counts as dead), its pid names another process (start time differs),
// or its own thread has exited. Drain thread only (not thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace spanring {

class OwnerWatch {
 public:
  // A leader thread's /proc read happens once every this many rounds per process: with the
  // drainer's 100 ms round, a leader thread that exited without releasing its ring (and whose
  // process lives on) is found within ~1 s.
  static constexpr uint64_t kLeaderRounds = 10;
  // A non-leader thread's tgkill happens once every this many rounds: a thread that exited
  // without releasing its ring is found within ~1 s.
  static constexpr uint64_t kThreadRounds = 10;

  // Pidfds kept open at most: a quarter of the soft RLIMIT_NOFILE, at most 512. The drainer's
  // /proc reads (here, and the command lines it announces) need descriptors too, and an open
  // that fails for want of one would read as a dead owner. Processes past it are looked at
  // through /proc, once per round.
  static constexpr size_t kMaxPidfds = 512;

  OwnerWatch() noexcept;
  ~OwnerWatch();
  OwnerWatch(const OwnerWatch&) = delete;
  OwnerWatch& operator=(const OwnerWatch&) = delete;

  // Starts a round: every process is looked at afresh (once) by the alive() calls that follow.
  void begin_round() noexcept { ++round_; }
  // Whether the owner still runs (see above). Call between begin_round() and end_round().
  bool alive(uint32_t pid, uint32_t tid, uint64_t start_time) noexcept;
  // Ends a round: forgets (and closes the pidfd of) every process no alive() call named in it.
  void end_round() noexcept;

  // Processes followed now, and how many of them through a pidfd (for tests and benchmarks).
  size_t processes() const noexcept { return procs_.size(); }
  size_t pidfds() const noexcept { return pidfds_open_; }

 private:
  struct Process {
    uint64_t start_time = 0;
    int pidfd = -1;             // -1: no pidfd; its /proc start time is read each round instead
    bool alive = false;         // as of round `checked`
    uint64_t checked = 0;       // the round whose answer `alive` is
    uint64_t seen = 0;          // the last round an alive() call named it
    bool leader_exited = false; // its leader thread was seen exited (a zombie)
  };
  void look(uint32_t pid, Process& p) noexcept;
  void close_pidfd(Process& p) noexcept;

  std::unordered_map<uint32_t, Process> procs_;  // by pid
  size_t pidfd_limit_ = 0;  // kMaxPidfds or less (RLIMIT_NOFILE)
  size_t pidfds_open_ = 0;
  uint64_t round_ = 1;
};

}  // namespace spanring
