/* A C99 runtime that emits its host spans through the adapter seam (tests/install,
 * install_adapter_pkgconfig_c and install_adapter_cmake_c): built from the install prefix only,
 * linked with libspanring-simpler instead of a logger's adapter, and run under the installed
 * `spanring run`. No spanring name appears below but the header's: the runtime's code is the
 * seam's. Exits 1 when the gate is closed, so a run that traced nothing fails. */
/* clock_gettime in strict C99 (-std=c99 hides POSIX). */
#define _POSIX_C_SOURCE 200809L

#include <spanring/simpler_host_span.h>

#include <stdio.h>
#include <time.h>

static int64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int main(void) {
  if (!unified_log_host_span_enabled()) {
    fprintf(stderr, "runtime.c: the host-span gate is closed (not under spanring run?)\n");
    return 1;
  }
  const int64_t start = mono_ns();
  SimplerHostSpan s = {.abi_version = SIMPLER_HOST_SPAN_ABI_VERSION,
                       .struct_size = sizeof(SimplerHostSpan),
                       .invocation_id = 11,
                       .callable_hash = 0x5eed,
                       .depth = 1,
                       .reserved = 0,
                       .timestamp_ns = start,
                       .duration_ns = mono_ns() - start,
                       .name = "chip.run.bind",
                       .attributes = "run_id=3 task_slot=5"};
  unified_log_host_span(&s);
  return 0;
}
