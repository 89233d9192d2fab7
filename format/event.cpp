#include "format/event.h"

namespace spanring {

const char* drop_reason_name(DropReason r) noexcept {
  switch (r) {
    case DropReason::kRingFull: return "ring_full";
    case DropReason::kInvalid: return "invalid";
    case DropReason::kNoRing: return "no_ring";
    case DropReason::kCorrupt: return "corrupt";
    case DropReason::kVfork: return "vfork";
    case DropReason::kReentrant: return "reentrant";
    case DropReason::kMaxSize: return "max_size";
    case DropReason::kOverwritten: return "overwritten";
  }
  return "unknown";
}

}  // namespace spanring
