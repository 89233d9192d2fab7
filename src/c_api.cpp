// The C ABI (include/spanring/spanring.h): thin wrappers over the C++ producer API.
#include "src/producer.h"

#include <spanring/span.h>
#include <spanring/spanring.h>

#include <cerrno>

extern "C" void spanring_emit(const spanring_span* span) {
  if (span == nullptr || !spanring::enabled()) return;
  spanring::record_any(*span);
}

extern "C" int spanring_enabled(void) { return spanring::enabled() ? 1 : 0; }

extern "C" int64_t spanring_now_ns(void) { return spanring::now_ns(); }

extern "C" void spanring_set_thread_name(const char* name) { spanring::set_thread_name(name); }

// The vfork wrapper's error path: errno from the failed syscall, -1 to the caller.
extern "C" __attribute__((visibility("hidden"))) int spanring_vfork_failed(long err) {
  errno = static_cast<int>(err);
  return -1;
}
