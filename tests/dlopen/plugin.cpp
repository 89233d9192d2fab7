// A plugin that records spans through spanring, built several times from this file (meson.build):
// PLUGIN_SPAN and PLUGIN_KEY are its span name and attribute key, literals of the same length in
// every build, so that two builds have the same layout and, loaded one after the other at the
// same address, their literals have the same addresses. Linked with libspanring.so or with
// libspanring.a; the host that loads it never linked spanring. Built with -O2: the literal name
// and key take the compact path (string ids kept in this plugin's call-site descriptor or cached
// by pointer in its module table), which is what the test is about.
#include <spanring/span.h>

#include <cstdint>

#ifndef __OPTIMIZE__
#error "plugin.cpp must be compiled with optimization (literal detection)"
#endif

extern "C" {

// The address of this plugin's span name (the host compares two plugins' addresses).
__attribute__((visibility("default"))) const char* plugin_span_name() { return PLUGIN_SPAN; }

// Records `count` spans named PLUGIN_SPAN, each with PLUGIN_KEY=<index>, on the calling thread:
// the even ones through SPANRING_SPAN (the site, a static of this function, lives in this
// plugin's .bss and must not keep it loaded), the odd ones through Span (on x86-64
// the call's own descriptor in this plugin's .data.spanring_site, elsewhere this
// module's table).
__attribute__((visibility("default"))) void plugin_record(int count) {
  for (int i = 0; i < count; ++i) {
    if (i % 2 == 0) {
      SPANRING_SPAN(s, PLUGIN_SPAN);
      s.attr(PLUGIN_KEY, i);
    } else {
      spanring::Span s(PLUGIN_SPAN);
      s.attr(PLUGIN_KEY, i);
    }
  }
}

}  // extern "C"
