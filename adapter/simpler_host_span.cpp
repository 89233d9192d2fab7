// The host-span adapter (simpler_host_span.h): the runtime's two-function seam on top of
// libspanring's exported record path (the C ABI's spanring_emit; spanring::emit_record for a
// span it refuses).
// Built on the public API only, so the producer's internals can change under it freely; the
// library exports these two functions and nothing else (simpler_host_span.map).
#include <spanring/simpler_host_span.h>

#include <spanring/span.h>
#include <spanring/spanring.h>

#include <cstddef>
#include <cstring>

static_assert(sizeof(SimplerHostSpan) == SPANRING_SIMPLER_HOST_SPAN_V1_SIZE,
              "the v1 struct of the runtime's header is 64 bytes on LP64");
static_assert(offsetof(SimplerHostSpan, invocation_id) == 8);
static_assert(offsetof(SimplerHostSpan, depth) == 24);
static_assert(offsetof(SimplerHostSpan, timestamp_ns) == 32);
static_assert(offsetof(SimplerHostSpan, name) == 48);
static_assert(offsetof(SimplerHostSpan, attributes) == 56);

// Past its first 8 bytes (abi_version, struct_size) the v1 struct is the C ABI's spanring_span,
// field for field: the adapter copies those 56 bytes into one and hands it to spanring_emit
// (the record path reads the numbers only after it has measured the strings, so it holds none
// of them across those calls).
constexpr size_t kSpanringSpanAt = offsetof(SimplerHostSpan, invocation_id);
static_assert(sizeof(spanring_span) == SPANRING_SIMPLER_HOST_SPAN_V1_SIZE - kSpanringSpanAt);
static_assert(offsetof(spanring_span, invocation_id) + kSpanringSpanAt ==
              offsetof(SimplerHostSpan, invocation_id));
static_assert(offsetof(spanring_span, callable_hash) + kSpanringSpanAt ==
              offsetof(SimplerHostSpan, callable_hash));
static_assert(offsetof(spanring_span, depth) + kSpanringSpanAt == offsetof(SimplerHostSpan, depth));
static_assert(offsetof(spanring_span, timestamp_ns) + kSpanringSpanAt ==
              offsetof(SimplerHostSpan, timestamp_ns));
static_assert(offsetof(spanring_span, duration_ns) + kSpanringSpanAt ==
              offsetof(SimplerHostSpan, duration_ns));
static_assert(offsetof(spanring_span, name) + kSpanringSpanAt == offsetof(SimplerHostSpan, name));
static_assert(offsetof(spanring_span, attributes) + kSpanringSpanAt ==
              offsetof(SimplerHostSpan, attributes));

// The library is built with hidden visibility (adapter/meson.build); these two are its exports.
#define SPANRING_SIMPLER_EXPORT __attribute__((visibility("default")))

extern "C" SPANRING_SIMPLER_EXPORT int unified_log_host_span_enabled(void) {
  // spanring::enabled() is one relaxed load of the segment pointer (span.h): the gate only
  // tells whether a segment is attached; the record path reads the pointer again itself.
  return spanring::enabled() ? 1 : 0;
}

extern "C" SPANRING_SIMPLER_EXPORT void unified_log_host_span(const SimplerHostSpan* span) {
  // Validate before reading any field past the first 8 bytes: struct_size is the caller's
  // promise of how many bytes are readable. Rejected: reading a newer version's fields by
  // guess. A span we cannot read is published as a drop marker (NULL name: reason `invalid`),
  // so the loss shows in the drainer's [SPANRING_DROPS] lines and summary. No gate here:
  // emit_record and spanring_emit each test that tracing is enabled (one relaxed load).
  if (__builtin_expect(span == nullptr || span->abi_version != SIMPLER_HOST_SPAN_ABI_VERSION ||
                           span->struct_size < SPANRING_SIMPLER_HOST_SPAN_V1_SIZE,
                       0)) {
    spanring::emit_record(nullptr, 0, 0, 0, 0, 0, nullptr);
    return;
  }
  // Every v1 field maps one to one onto a spanring record (the [STRACE] line's fields);
  // `reserved` is ignored. NULL/empty name and negative depth/ts/dur are spanring_emit's
  // `invalid`. The v1 fields past the first 8 bytes are a spanring_span (asserted above).
  // Copied, not cast: reading a SimplerHostSpan through a spanring_span pointer would break
  // the aliasing rules, whatever the layout; the copy is a few register moves.
  spanring_span fields;
  std::memcpy(&fields, reinterpret_cast<const char*>(span) + kSpanringSpanAt, sizeof fields);
  spanring_emit(&fields);
}
