// Whether the process a segment recorded (pid plus start time, as the header and the ring table
// hold them) still runs. One answer for every reader of a segment: the drainer lock, `stat`,
// `clean`.
#pragma once

#include "src/proc.h"

#include <cstdint>

namespace spanring {

// True while process `pid` runs and is the one that started at `start_time` (clock ticks since
// boot, process_start_time()). A pid or start time of 0 is "none recorded": false, since a
// reused pid must never pass for the recorded process.
inline bool recorded_process_alive(uint32_t pid, uint64_t start_time) noexcept {
  return pid != 0 && start_time != 0 && process_start_time(pid) == start_time;
}

}  // namespace spanring
