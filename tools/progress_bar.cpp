#include "tools/progress_bar.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

namespace spanring {

void show_progress(TraceInput& in, uint64_t min_bytes) {
  if (!::isatty(STDERR_FILENO) || !in.size() || *in.size() < min_bytes) return;
  const uint64_t total = *in.size();
  struct State {
    std::chrono::steady_clock::time_point last{};
    bool done = false;
  };
  auto st = std::make_shared<State>();
  const std::string name = in.name();
  in.on_progress([total, st, name](uint64_t at) {
    if (st->done) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - st->last < std::chrono::milliseconds(200) && at < total) return;
    st->last = now;
    if (at >= total) {
      st->done = true;
      std::fprintf(stderr, "\r\033[K");  // the bar goes away once the input is read
      return;
    }
    const int pct = static_cast<int>(at * 100 / total);
    const int filled = pct * 30 / 100;
    std::fprintf(stderr, "\r\033[Kspanring: %s [%.*s%*s] %3d%% (%llu of %llu MiB)", name.c_str(),
                 filled, "==============================", 30 - filled, "", pct,
                 static_cast<unsigned long long>(at >> 20),
                 static_cast<unsigned long long>(total >> 20));
  });
}

}  // namespace spanring
