/* A C99 consumer of an installed spanring (tests/install, install_pkgconfig_c and
 * install_pkgconfig_static_c): built from the install prefix only, with
 *   cc -std=c99 app.c $(pkg-config --cflags --libs spanring)
 * and run under the installed `spanring run`. It emits one span through the C ABI; the test
 * looks for it in the trace. Exits 1 when tracing is not enabled, so a run that silently traced
 * nothing fails rather than passes. */
#include <spanring/spanring.h>

#include <stdio.h>

int main(void) {
  if (!spanring_enabled()) {
    fprintf(stderr, "app.c: tracing is not enabled (SPANRING_SEGMENT unset or not a segment)\n");
    return 1;
  }
  const int64_t start = spanring_now_ns();
  volatile unsigned sum = 0;
  for (unsigned i = 0; i < 1000; ++i) sum += i;
  spanring_span s = {.invocation_id = 7,
                     .callable_hash = 0xc0de,
                     .depth = 0,
                     .reserved = 0,
                     .timestamp_ns = start,
                     .duration_ns = spanring_now_ns() - start,
                     .name = "ext.install_c.step",
                     .attributes = "lang=c batch=16"};
  spanring_emit(&s);
  return 0;
}
