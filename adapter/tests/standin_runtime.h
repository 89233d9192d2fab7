// A stand-in for the runtime the adapter seam was made for (tests/test_mp_adapter.cpp): a shared
// object whose host code emits every span through the seam (unified_log_host_span_enabled, then
// unified_log_host_span), as that runtime's orchestrator, scheduler and workers do. It is linked
// with libspanring-simpler (standin_runtime) or carries a logger adapter of its own, exported
// with default visibility (standin_runtime_logger), which LD_PRELOAD of the adapter replaces.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Emits the stand-in's workload and appends one JSON line per span it handed to the seam (the
// raw fields, name and attributes in hex) to `out_jsonl`, plus one summary line
// {"summary":1,"pid":..,"enabled":0|1,"invalid":N,"spans":N} per process:
//   - `threads` threads, each `spans` spans: a chip.run invocation (inv, hid, depth 0..3, one
//     clk=dev device span) and odd names and attributes that need encoding;
//   - one thread writing `burst` node.* spans back to back (a scheduler's per-task spans);
//   - with `fork_child`, a forked child writing `spans` spans of its own;
//   - the spans the seam must refuse (counted in "invalid"): NULL, a wrong abi_version, a
//     struct_size below v1 (its 8 bytes end at a PROT_NONE page, so reading past them faults),
//     a NULL name; and one from a newer caller (struct_size 72, an extra field), accepted.
// Returns 0, or 1 when the output file cannot be written or a thread or child fails.
int standin_run(const char* out_jsonl, int threads, int spans, int burst, int fork_child);

typedef int (*standin_run_fn)(const char*, int, int, int, int);

#ifdef __cplusplus
}
#endif
