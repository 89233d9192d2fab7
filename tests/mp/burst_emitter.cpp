// burst_emitter: one thread writes N spans as fast as it can, first thing after it starts (a
// new user's first try, and the start-up case a drainer that sleeps while idle must survive).
//
//   burst_emitter [--count N] [--wide]
//
// Each span is `burst.span` with one integer attribute `i=<n>` (n = 0..N-1): a compact record,
// one slot, where the compiler folds the literals (this file is built with -O2). --wide gives
// every span a name and attribute text that are not literals, so each is an ordinary record of
// two slots: the same burst taking twice the ring. Nothing else runs before the first span.
#include <spanring/span.h>
#include <spanring/spanring.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  uint64_t n = 20000;
  bool wide = false;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--count") == 0 && a + 1 < argc)
      n = std::strtoull(argv[++a], nullptr, 10);
    else if (std::strcmp(argv[a], "--wide") == 0)
      wide = true;
    else
      return 2;
  }
  if (!wide) {
    for (uint64_t i = 0; i < n; ++i) {
      spanring::Span s{"burst.span"};
      s.attr("i", static_cast<int64_t>(i));
    }
    return 0;
  }
  // A name read from memory the compiler cannot see into: never a literal, so never interned.
  std::string name = "burst.wide.span";
  const char* volatile name_p = name.c_str();
  for (uint64_t i = 0; i < n; ++i) {
    spanring::Span s{name_p};
    s.attr("i", static_cast<int64_t>(i));
  }
  return 0;
}
