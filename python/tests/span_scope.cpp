// span_scope: a C++ span that Python opens and closes through ctypes, for the test that nests a
// Python span inside a C++ span (python/tests/test_traced.py). Linked against the same shared
// libspanring as the extension, so both spans share the thread's ring and depth.
#include <spanring/span.h>

extern "C" {

// Begins a spanring::Span named `name` (which must stay valid until the span ends) on the
// calling thread; the handle goes to span_scope_end on the same thread.
void* span_scope_begin(const char* name) { return new spanring::Span(name); }

// Ends and records the span.
void span_scope_end(void* span) { delete static_cast<spanring::Span*>(span); }

}  // extern "C"
