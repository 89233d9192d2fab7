// LTTng-UST tracepoint provider of bench_record's `lttng_ust` arm: one event with the fields of
// one spanring span record (name, inv, hid, depth, ts, dur and the 4 integer attributes of the
// record the other arms write). Built only when liblttng-ust-dev is present (bench/meson.build).
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER spanring_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./bench_tp.h"

#if !defined(SPANRING_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define SPANRING_BENCH_TP_H

#include <lttng/tracepoint.h>

#include <stdint.h>

LTTNG_UST_TRACEPOINT_EVENT(
    spanring_bench, span,
    LTTNG_UST_TP_ARGS(const char*, name, uint64_t, inv, uint64_t, hid, uint32_t, depth,
                      uint64_t, ts, uint64_t, dur, uint64_t, run_id, uint64_t, task_slot,
                      uint64_t, worker_id, uint64_t, dispatch_id),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_string(name, name)
        lttng_ust_field_integer(uint64_t, inv, inv)
        lttng_ust_field_integer_hex(uint64_t, hid, hid)
        lttng_ust_field_integer(uint32_t, depth, depth)
        lttng_ust_field_integer(uint64_t, ts, ts)
        lttng_ust_field_integer(uint64_t, dur, dur)
        lttng_ust_field_integer(uint64_t, run_id, run_id)
        lttng_ust_field_integer(uint64_t, task_slot, task_slot)
        lttng_ust_field_integer(uint64_t, worker_id, worker_id)
        lttng_ust_field_integer(uint64_t, dispatch_id, dispatch_id)))

#endif  // SPANRING_BENCH_TP_H

#include <lttng/tracepoint-event.h>
