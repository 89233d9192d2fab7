// A C++17 consumer of spanring (tests/install): the same source is built by CMake
// (CMakeLists.txt: find_package(spanring CONFIG), install_cmake_cxx17) and by Meson
// (meson.build: dependency('spanring'), install_meson and install_meson_subproject), each from
// the install prefix only or from spanring as a subproject. Run under the installed
// `spanring run BUILT_WITH`, it emits three spans the test looks for in the trace, each with
// `built_with=BUILT_WITH`. Exits 1 when tracing is not enabled, so a run that silently traced
// nothing fails rather than passes.
#include <spanring/span.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s BUILT_WITH\n", argv[0]);
    return 2;
  }
  if (!spanring::enabled()) {
    std::fprintf(stderr, "app.cpp: tracing is not enabled (SPANRING_SEGMENT unset or not a segment)\n");
    return 1;
  }
  const std::string built_with = argv[1];
  spanring::Invocation inv{42, 0x9f3c};
  {
    spanring::Span outer{"ext.install_cxx.outer"};
    outer.attr("built_with", built_with.c_str()).attr("step", 1);
    {
      // The call-site form (a static descriptor of this site), in a C++17 program.
      SPANRING_SPAN(inner, "ext.install_cxx.inner");
      inner.attr("built_with", built_with.c_str());
    }
    const std::string attrs = "built_with=" + built_with;
    spanring::emit("ext.install_cxx.emitted", spanring::now_ns(), 1000, attrs.c_str());
  }
  return 0;
}
