// Is a process (or one of its threads) still the one that was recorded? The segment names
// processes by pid plus start time, since pids are reused; these read /proc to answer.
//
// Internal to spanring (producer fork handler, drainer owner checks, DrainerLock, clean).
// Every function is async-signal-safe in practice: open/read/close and snprintf into stack
// buffers, no allocation, so the producer may call them from its fork child handler.
#pragma once

#include <cstdint>

namespace spanring {

// Process start time in clock ticks since boot (field 22 of /proc/PID/stat), or 0 when the
// process does not exist, has exited (a zombie not yet reaped, with no thread left) or cannot
// be read. Together with the pid it names one process even after the pid is reused.
uint64_t process_start_time(uint32_t pid) noexcept;

// True while thread `tid` of process `pid` runs, where `start_time` is the process start time
// recorded when the thread took its ring (so a reused pid is not mistaken for the owner). A
// process whose main thread exited while others run is alive; the owner is gone once its own
// thread has exited or the process is gone.
bool thread_alive(uint32_t pid, uint32_t tid, uint64_t start_time) noexcept;

// True while thread `tid` of process `pid` exists and has not exited (its
// /proc/PID/task/TID/stat state is neither Z nor X). Says nothing about pid reuse: the caller
// has established that `pid` is still the process it means (OwnerWatch, drain/owner_watch.h).
bool task_alive(uint32_t pid, uint32_t tid) noexcept;

}  // namespace spanring
