// The LTTng-UST probes of bench_tp.h, compiled once (LTTng's "tracepoint provider" unit).
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "bench_tp.h"
