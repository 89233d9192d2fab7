#include <spanring/test_point.h>

#ifdef SPANRING_TEST_POINTS
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace spanring::detail {

void test_point(const char* name) noexcept {
  // getenv only: no allocation, usable from the producer's claim path.
  static const char* armed = std::getenv("SPANRING_TEST_POINT");
  if (armed == nullptr || std::strcmp(armed, name) != 0) return;
  static const long hit_at = [] {
    const char* n = std::getenv("SPANRING_TEST_POINT_HIT");
    return n != nullptr ? std::strtol(n, nullptr, 10) : 1L;
  }();
  static std::atomic<long> hits{0};
  if (hits.fetch_add(1, std::memory_order_relaxed) + 1 == hit_at) ::raise(SIGKILL);
}

}  // namespace spanring::detail
#endif
