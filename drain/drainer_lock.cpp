// DrainerLock (drain/drainer_lock.h).
#include "drain/drainer_lock.h"

#include "src/proc.h"

#include <unistd.h>

#include <cerrno>
#include <string>

namespace spanring {

DrainerLock::DrainerLock(const Segment& segment)
    : segment_(segment), pid_(static_cast<uint32_t>(::getpid())) {
  SegmentHeader& h = segment.header();
  for (;;) {
    // acquire: pairs with a previous drainer's release when it let go of the segment.
    uint32_t holder = h.drainer_pid.load(std::memory_order_acquire);
    if (holder != 0 && holder != pid_) {
      const uint64_t start = process_start_time(holder);
      if (start != 0 && start == h.drainer_start_time)
        throw Error("segment '" + segment.name() + "' is being drained by pid " +
                        std::to_string(holder) + "; one drainer per segment",
                    EBUSY, segment.name());
      // The holder is dead (or its pid was reused): take over from it.
    }
    if (h.drainer_pid.compare_exchange_strong(holder, pid_, std::memory_order_acq_rel,
                                              std::memory_order_acquire))
      break;
  }
  h.drainer_start_time = process_start_time(pid_);
}

DrainerLock::~DrainerLock() {
  uint32_t me = pid_;
  // release: everything we committed happens-before the next drainer's acquire.
  segment_.header().drainer_pid.compare_exchange_strong(me, 0, std::memory_order_release,
                                                        std::memory_order_relaxed);
}

}  // namespace spanring
