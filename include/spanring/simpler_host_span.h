/* spanring's host-span adapter: the two-function seam through which a runtime's host code emits
 * its spans (the "simpler" runtime's unified_log_host_span seam, ABI version 1), implemented by
 * writing each span into spanring's rings. Installed as <spanring/simpler_host_span.h>; the
 * library is libspanring-simpler (pkg-config `spanring-simpler`, CMake
 * `spanring::spanring_simpler`), which links libspanring.
 *
 * How a runtime adopts it, with no change to its source (docs/adapter.md):
 *   - link time: its build links libspanring-simpler instead of its logger's adapter file;
 *   - run time: when the runtime's shared object exports the two functions itself (default
 *     visibility), LD_PRELOAD=libspanring-simpler.so interposes them. A runtime that compiles its
 *     logger's adapter with hidden visibility binds the calls inside its own object: only the
 *     link-time way works for it.
 * Either way the process is traced when SPANRING_SEGMENT names a live segment when libspanring
 * is loaded (`spanring run -- CMD` sets it), as for any other spanring producer.
 *
 * The struct is the runtime's own (facts of its public header, for compatibility): the field
 * names, types and order below must not change. A program that includes the runtime's header
 * first gets the runtime's definition (SIMPLER_HOST_SPAN_ABI_VERSION is then defined) and this
 * header declares only the functions.
 *
 * What the [STRACE] line holds (shared/strace-format.md): `inv` = invocation_id, `hid` =
 * callable_hash, `depth`, `name`, `ts` = timestamp_ns, `dur` = duration_ns, the attributes; pid
 * and tid of the emitting thread. Names and attributes are encoded and cut (64 / 192 encoded
 * bytes, `~`) by the drainer, exactly as the runtime's logger does; the adapter copies at most
 * 65 raw name bytes and 193 raw attribute bytes (read as spanring_emit reads them, spanring.h:
 * on x86-64 up to 15 bytes past the NUL, never in a page the string does not reach). A span whose attributes hold `clk=dev` is a
 * device span: its ts is passed through unchanged and never moves the process' clock anchor,
 * and the exports draw it on a "device clock" process, never on a host lane.
 */
#ifndef SPANRING_SIMPLER_HOST_SPAN_H
#define SPANRING_SIMPLER_HOST_SPAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SIMPLER_HOST_SPAN_ABI_VERSION
/* The seam's ABI version. Fields are only ever appended within a version (struct_size says
 * how many the caller has); another version is a different layout. */
#define SIMPLER_HOST_SPAN_ABI_VERSION 1U

typedef struct SimplerHostSpan {
  uint32_t abi_version;    /* SIMPLER_HOST_SPAN_ABI_VERSION (1); any other value drops the span */
  uint32_t struct_size;    /* sizeof(SimplerHostSpan) of the caller, bytes: >= 64 (the v1 size)
                              is accepted and bytes past the v1 fields are never read; less drops
                              the span, read no further than these first 8 bytes */
  uint64_t invocation_id;  /* `inv`, 0 = none */
  uint64_t callable_hash;  /* `hid`, written in lowercase hex, 0 = none */
  int32_t depth;           /* nesting depth, 0 = outermost; negative drops the span */
  int32_t reserved;        /* ignored */
  int64_t timestamp_ns;    /* span start, CLOCK_MONOTONIC ns; device spans: device-clock ns with
                              `clk=dev` in attributes. Negative drops the span */
  int64_t duration_ns;     /* ns; negative drops the span */
  const char *name;        /* NUL-terminated raw bytes, dotted (`chip.run.bind`); NULL or ""
                              drops the span */
  const char *attributes;  /* NUL-terminated raw "k=v k=v"; "" or NULL = none */
} SimplerHostSpan;
#endif

/* The size of the v1 struct in bytes: the least struct_size the adapter accepts. */
#define SPANRING_SIMPLER_HOST_SPAN_V1_SIZE 64U

/* 1 when spans go to a spanring segment (this process was started under `spanring run`, or
 * SPANRING_SEGMENT named a live segment when libspanring was loaded), else 0. One relaxed load
 * and a compare: the runtime checks it before formatting a span. Any thread, async-signal-safe,
 * no syscall. */
int unified_log_host_span_enabled(void);

/* Copies *span into the calling thread's ring: written by the adapter itself when the thread's
 * ring is claimed and has room before its end (the C ABI's text record, the same bytes and
 * reads as spanring_emit's, spanring.h), else through spanring_emit. Nothing happens when
 * tracing is disabled. A span the adapter cannot accept is not written and
 * is counted as a dropped record with reason `invalid` (reported by the drainer as a
 * [SPANRING_DROPS] line and in `spanring run`'s summary): span NULL, abi_version != 1,
 * struct_size < 64, a NULL or empty name, a negative depth, timestamp_ns or duration_ns. A full
 * ring drops the span too (reason `ring_full`), as for every spanring record.
 * Thread-safety and cost: any thread, also signal handlers; after the thread's first span no
 * syscall, no lock, no allocation; never blocks, throws or aborts. */
void unified_log_host_span(const SimplerHostSpan *span);

#ifdef __cplusplus
}
#endif

#endif /* SPANRING_SIMPLER_HOST_SPAN_H */
