// The host-span adapter (simpler_host_span.h): the runtime's two-function seam, writing each
// span into the calling thread's ring itself in the common case (the library's text record
// path, record_any in src/span.cpp, inlined here: no call into libspanring, no copy of the
// struct), and through libspanring's exported record path (spanring_emit; emit_record for a
// span it cannot read) for everything else. It compiles in ThreadState's and RingWriter's
// layout (thread_state.h), as every program inlining a Span does: it is built and installed
// with libspanring, with the same soversion. The library exports these two functions and
// nothing else (simpler_host_span.map).
#include <spanring/simpler_host_span.h>

#include <spanring/span.h>
#include <spanring/spanring.h>
#include <spanring/thread_state.h>

#include "src/text_copy.h"

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

namespace {

// Everything the inline path below leaves: a span it cannot read (NULL, another abi_version, a
// struct_size below the v1 size), a thread without a ring, busy or in a vfork child, a ring
// with too few free slots before its end, and a span that is invalid or starts before what its
// ring announced. Through the library's record path, which counts what it refuses.
__attribute__((noinline, cold)) void host_span_library(const SimplerHostSpan* span) noexcept {
  // Validate before reading any field past the first 8 bytes: struct_size is the caller's
  // promise of how many bytes are readable. Rejected: reading a newer version's fields by
  // guess. A span we cannot read is published as a drop marker (NULL name: reason `invalid`),
  // so the loss shows in the drainer's [SPANRING_DROPS] lines and summary. No gate here:
  // emit_record and spanring_emit each test that tracing is enabled (one relaxed load).
  if (span == nullptr || span->abi_version != SIMPLER_HOST_SPAN_ABI_VERSION ||
      span->struct_size < SPANRING_SIMPLER_HOST_SPAN_V1_SIZE) {
    spanring::emit_record(nullptr, 0, 0, 0, 0, 0, nullptr);
    return;
  }
  // Every v1 field maps one to one onto a spanring record (the [STRACE] line's fields);
  // `reserved` is ignored. NULL/empty name and negative depth/ts/dur are spanring_emit's
  // `invalid`. The v1 fields past the first 8 bytes are a spanring_span (asserted above).
  // Copied, not cast: reading a SimplerHostSpan through a spanring_span pointer would break
  // the aliasing rules, whatever the layout.
  spanring_span fields;
  std::memcpy(&fields, reinterpret_cast<const char*>(span) + kSpanringSpanAt, sizeof fields);
  spanring_emit(&fields);
}

// The inline path below set busy and then found too few free slots, an invalid span or one
// before the ring's anchor: busy released, then the library's path. Out of line and a tail
// call: the inline path then holds nothing across a call, so it saves no registers.
__attribute__((noinline, cold)) void host_span_refused(spanring::detail::ThreadState& t,
                                                       const SimplerHostSpan* span) noexcept {
  spanring::detail::release_busy(t);
  host_span_library(span);
}

}  // namespace

extern "C" SPANRING_SIMPLER_EXPORT void unified_log_host_span(const SimplerHostSpan* span) {
  using spanring::detail::ThreadState;
  // The common case, written here as the library's text record path writes it (record_any,
  // src/span.cpp): a readable v1 span, a thread whose ring is claimed, not busy, not a vfork
  // child (the thread's gate: text_gate_open), and 6 free slots from head that do not wrap (RingWriter::text_room). The name and
  // the attributes are measured while they are copied into the ring (copy_measured), the
  // numbers are read after the copy (held across it they would take registers), and a valid
  // record is published. The fields are read through the caller's own struct type: no copy.
  ThreadState* const t = spanring::detail::t_self;
  if (__builtin_expect(span != nullptr &&
                           span->abi_version == SIMPLER_HOST_SPAN_ABI_VERSION &&
                           span->struct_size >= SPANRING_SIMPLER_HOST_SPAN_V1_SIZE &&
                           spanring::detail::text_gate_open(*t),
                       1)) {
    // busy from before the copy: a signal handler's record meanwhile would take the same slots
    // (it is dropped and counted, and announced by release_busy). gate_or: a drop a handler
    // marks just before (kGateGap) is kept.
    t->ring.gate_or(spanring::kGateBusy);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (__builtin_expect(t->ring.text_room(), 1)) {
      char* const dst = t->ring.text_payload();
      static_assert(spanring::kNameRawMax + spanring::kAttrsRawMax +
                        spanring::kCopyMeasuredOvershoot <=
                    spanring::kInlinePayloadBytes +
                        (spanring::RingWriter::kTextRoomSlots - 1) * spanring::kSlotBytes);
      const uint32_t name_len = spanring::copy_measured(dst, span->name, spanring::kNameRawMax);
      const uint32_t attrs_len =
          spanring::copy_measured(dst + name_len, span->attributes, spanring::kAttrsRawMax);
      const int64_t ts_ns = span->timestamp_ns;
      const int64_t dur_ns = span->duration_ns;
      const int32_t depth = span->depth;
      // A valid record (a name, nothing negative) not before what the ring announced
      // (early_ns: a span before the process' clock anchor goes through the library, which
      // announces the anchor at the clock's origin first).
      if (__builtin_expect(name_len != 0 && (ts_ns | dur_ns | depth) >= 0 &&
                               ts_ns > t->early_ns,
                           1)) {
        t->ring.commit_text(dst, name_len, attrs_len, static_cast<uint64_t>(ts_ns),
                            static_cast<uint64_t>(dur_ns), span->invocation_id,
                            span->callable_hash, static_cast<uint32_t>(depth), 0);
        spanring::detail::release_busy(*t);
        return;
      }
    }
    // Nothing was published: the bytes copied lie past head, where the next record overwrites
    // them.
    return host_span_refused(*t, span);
  }
  host_span_library(span);
}
