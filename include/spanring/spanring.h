/* spanring C ABI: a drop-in for the span struct that today's [STRACE] producers pass by pointer
 * (shared/strace-format.md, "The C ABI that producers use today"). Callers port by renaming.
 *
 * Thread-safety: every function may be called from any thread and from signal handlers. After a
 * thread's first record, spanring_emit makes no syscall, takes no lock and allocates nothing;
 * it never blocks, throws or aborts. Records that cannot be stored are dropped and counted.
 */
#ifndef SPANRING_SPANRING_H
#define SPANRING_SPANRING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spanring_span {
  uint64_t invocation_id; /* `inv`, 0 = none */
  uint64_t callable_hash; /* `hid`, written in lowercase hex, 0 = none */
  int32_t depth;          /* nesting depth, 0 = outermost; negative drops the record */
  int32_t reserved;       /* set to 0 */
  int64_t timestamp_ns;   /* span start, CLOCK_MONOTONIC ns (clk=dev: device clock offset) */
  int64_t duration_ns;    /* ns; negative drops the record */
  const char *name;       /* NUL-terminated raw bytes, encoded and cut to 64 bytes by the
                             drainer; NULL or "" drops the record (counted as `invalid`) */
  const char *attributes; /* NUL-terminated raw "k1=v1 k2=v2", cut to 192 encoded bytes;
                             NULL = none */
} spanring_span;

/* Copies *span into the calling thread's ring. Nothing happens when tracing is disabled or
 * span is NULL. At most the first 65 name bytes and 193 attribute bytes are stored.
 * Reading: on x86-64 the strings are measured while they are copied, 16 bytes at a time, so
 * up to 15 bytes past a string's NUL (or past those 65 / 193 bytes) may be read, never in a
 * page the string does not reach: like glibc's own strlen, this cannot fault, but a memory
 * checker that does not know it (valgrind's memcheck) may report those reads. Sanitizer
 * builds of the library (ASan, TSan) and other architectures read only up to the NUL. */
void spanring_emit(const spanring_span *span);

/* 1 when records go to a segment (SPANRING_SEGMENT named a live segment at load), else 0.
 * Check it before building a record. */
int spanring_enabled(void);

/* CLOCK_MONOTONIC in ns, the clock of every host timestamp. */
int64_t spanring_now_ns(void);

/* Names the calling thread in the trace: the ring it claims next (its first span, or its first
 * span in a forked child) carries the first 16 bytes of name instead of the kernel's thread name
 * (prctl PR_GET_NAME). A ring the thread already holds keeps its name: call it before the
 * thread's first span. NULL or "" goes back to the kernel's name. Names only the calling thread;
 * the thread's first call maps its state (one mmap) when it has none yet, otherwise no syscall
 * and no allocation; works while tracing is disabled too. */
void spanring_set_thread_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* SPANRING_SPANRING_H */
