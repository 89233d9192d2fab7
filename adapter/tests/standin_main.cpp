// The stand-in runtime's program (standin_runtime.h): as a runtime's executable, linked with
// the runtime's shared object (built without STANDIN_DLOPEN), or as a Python binding loads its
// runtime, with dlopen (STANDIN_DLOPEN: the library path is the first argument after --lib).
//
//   standin_main --out FILE [--lib PATH] [--threads N] [--spans N] [--burst N] [--fork 0|1]
#include "adapter/tests/standin_runtime.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  const char* out = nullptr;
  const char* lib = nullptr;
  int threads = 4, spans = 200, burst = 1200, fork_child = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--out") out = argv[i + 1];
    else if (opt == "--lib") lib = argv[i + 1];
    else if (opt == "--threads") threads = std::atoi(argv[i + 1]);
    else if (opt == "--spans") spans = std::atoi(argv[i + 1]);
    else if (opt == "--burst") burst = std::atoi(argv[i + 1]);
    else if (opt == "--fork") fork_child = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "standin: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (out == nullptr) {
    std::fprintf(stderr, "standin: --out FILE is required\n");
    return 2;
  }
#ifdef STANDIN_DLOPEN
  if (lib == nullptr) {
    std::fprintf(stderr, "standin: --lib PATH is required\n");
    return 2;
  }
  // RTLD_LOCAL, as CPython loads an extension module: the runtime and what it needs
  // (libspanring-simpler, libspanring) are resolved within the loaded objects.
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::fprintf(stderr, "standin: dlopen %s: %s\n", lib, dlerror());
    return 1;
  }
  const auto run = reinterpret_cast<standin_run_fn>(dlsym(h, "standin_run"));
  if (run == nullptr) {
    std::fprintf(stderr, "standin: dlsym standin_run: %s\n", dlerror());
    return 1;
  }
  return run(out, threads, spans, burst, fork_child);
#else
  (void)lib;
  return standin_run(out, threads, spans, burst, fork_child);
#endif
}
