// DrainerLock: one drainer per segment. Taken in the segment header (drainer_pid, a CAS from 0
// or from a dead holder), released by the destructor.
//
// Drainer process only; construct before recover() and the Drainer, destroy after them.
#pragma once

#include <spanring/segment.h>

#include <cstdint>

namespace spanring {

class DrainerLock {
 public:
  // Takes the segment for this process. A holder that died (pid + start time, since pids are
  // reused) is replaced. Throws Error (ErrorCode::kBusy, EBUSY) naming the live drainer's pid
  // when another drainer holds the segment.
  explicit DrainerLock(const Segment& segment);
  ~DrainerLock();
  DrainerLock(const DrainerLock&) = delete;
  DrainerLock& operator=(const DrainerLock&) = delete;

 private:
  const Segment& segment_;
  uint32_t pid_;
};

}  // namespace spanring
