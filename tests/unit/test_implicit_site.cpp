// The implicit call-site descriptors (span.h, call_descriptor): Span(name) and emit with
// literals keep their ids in their call's own descriptor, not in the module's table, on every
// target that builds the descriptors (x86-64 and aarch64). Its own executable: a process keeps
// at most 16 attached regions off the heap (Segment::leak), and test_emit_site_producer has
// that many. Compiled with -O2 (tests/unit/meson.build): literal detection needs the optimizer.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>

#include "producer_test_util.h"

#include <cstring>

using namespace spanring;
using producer_test::Slot;
using producer_test::TestSegment;

#ifndef __OPTIMIZE__
#error "test_implicit_site.cpp must be compiled with optimization (literal detection)"
#endif

// Whether this module's string table (detail::g_module_strings, Span(name)'s and emit's table
// when the call has no descriptor of its own) holds a word for a pointer to `text`.
namespace {
bool module_table_holds(const char* text) {
  for (const auto& word : detail::g_module_strings.words) {
    // relaxed: the recording thread has been joined.
    const uint64_t w = word.load(std::memory_order_relaxed);
    if (w != 0 && std::strcmp(reinterpret_cast<const char*>(w >> 16), text) == 0) return true;
  }
  return false;
}
}  // namespace

// The implicit call-site descriptors (call_descriptor) are built on both targets spanring
// ships for: a build that dropped either would still pass every output test, through the
// module's table, so the configuration is checked here and the path below.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__)) && \
    !defined(__code_model_large__) && !defined(__AARCH64_CMODEL_LARGE__)
static_assert(SPANRING_IMPLICIT_SITE == 1,
              "x86-64 and aarch64 give Span(name) and emit a descriptor per call");
#endif

TEST_CASE("Span(name) and emit with literals use their call's descriptor, not the module's table") {
  TestSegment t("implicit_path");
  const auto recs = t.records_of([] {
    for (int i = 0; i < 2; ++i) {
      { Span s{"implicit.path.span"}; }
      CHECK(emit("implicit.path.emit", 1000 + i, 5, "implicit_path=1"));
    }
  });
  REQUIRE(recs.size() == 4);
  for (const Slot& s : recs) CHECK((s.flags() & kRecordCompact) != 0);
  CHECK(t.string(recs[0].compact().name) == "implicit.path.span");
  CHECK(t.string(recs[1].compact().name) == "implicit.path.emit");
  CHECK(t.string(recs[1].compact().keys[0]) == "implicit_path=1");
  // With a descriptor the ids are kept in it; without one (SPANRING_IMPLICIT_SITE 0) they are
  // cached in the module's table by the literal's pointer.
  CHECK(module_table_holds("implicit.path.span") == !SPANRING_IMPLICIT_SITE);
  CHECK(module_table_holds("implicit.path.emit") == !SPANRING_IMPLICIT_SITE);
  CHECK(module_table_holds("implicit_path=1") == !SPANRING_IMPLICIT_SITE);
}
