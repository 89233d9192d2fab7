// Test points: places where a test can make a process kill itself, to stop it at an exact
// state (a drainer between writing a buffer and committing it, a producer in the middle of a
// ring claim). Compiled in only when Meson's `test_points` option is on (the default for
// non-release builds, so that `meson test` can use them); in a release build the macro is
// empty and costs nothing.
//
// At run time: SPANRING_TEST_POINT=<name> arms the point of that name; SPANRING_TEST_POINT_HIT=N
// (default 1) makes the N-th pass through it raise SIGKILL. Cold paths only.
#pragma once

#ifdef SPANRING_TEST_POINTS
namespace spanring::detail {
void test_point(const char* name) noexcept;
}  // namespace spanring::detail
#define SPANRING_TEST_POINT(name) ::spanring::detail::test_point(name)
#else
#define SPANRING_TEST_POINT(name) ((void)0)
#endif
