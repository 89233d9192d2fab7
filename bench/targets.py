#!/usr/bin/env python3
"""bench/targets.py: the performance targets, checked from the files bench/run collected.

    bench/targets.py DIR

DIR holds ir.tsv (bench/ir-per-record --tsv), ir-drainer.tsv (bench/ir-drainer --tsv) and, for
each run k = 1..N of the timing benchmarks, record-k.json, drain-k.json and l3-k.json (their
--json output; a missing file is a run that failed). Prints Markdown: the instruction table
(one callgrind run: instruction counts do not vary between runs of the same binary) and the
timing table (the median over the runs of each same-run ratio or rate), every target marked met
or missed. The "baseline" column is the figure measured on main before this
round, for comparison; it is not measured here.
"""
import csv
import json
import os
import statistics
import sys

# arm -> (what, baseline, target as (comparison, limit) or None)
IR_ROWS = [
    ("floor", "floor: 2 rdtsc, one 64-byte store to an L1 thread-local ring, release store",
     "39", None),
    ("loop", "the benchmark's loop alone, nothing recorded: its share of the disabled arm",
     "-", None),
    ("loop_values", "the benchmark's loop computing the 4 values, nothing recorded: its share "
     "of the `Span` arms with attributes", "-", None),
    ("spanring_span", "spanring `Span`, 16-byte literal name, 4 integer attributes "
     "(the loop computing the values included; issue 20)", "331", ("<=", 80)),
    ("spanring_span_site", "spanring `SPANRING_SPAN`, the same span", "-", ("<=", 80)),
    ("spanring_span_noattr", "spanring `Span`, no attribute (issue 20)", "240", ("<=", 50)),
    ("spanring_span_site_noattr", "spanring `SPANRING_SPAN`, no attribute", "-", ("<=", 50)),
    ("spanring_emit", "spanring `emit`, literal name and attributes (issue 20)", "149",
     ("<=", 50)),
    ("spanring_emit_site", "spanring `SPANRING_EMIT`, the same records", "-", ("<=", 50)),
    ("spanring_c_emit", "C ABI `spanring_emit`, 60-byte runtime attributes (issue 20)", "288",
     ("<=", 150)),
    ("spanring_c_emit_page_end", "the same, the attribute string in the last 64 bytes of a "
     "page (its page-tested copy)", "-", None),
    ("spanring_simpler", "host-span adapter `unified_log_host_span`, 40-byte attributes "
     "(issue 21)", "312.6", ("<=", 150)),
    ("spanring_disabled", "spanring disabled `Span` (issue 20)", "8", ("<=", 5)),
    ("moodycamel_tsc", "moodycamel enqueue, producer token, 2 rdtsc", "56", None),
    ("lttng_ust", "LTTng-UST tracepoint, same fields, active session (its own clock read is a "
     "system call under valgrind: ~50 more natively)", "1,732", None),
    ("quill", "Quill `LOG_INFO` with 4 integers", "63", None),
    ("write_strace_file", "`[STRACE]` line, user space only (snprintf, mutex), the syscall not "
     "counted", "7,971", None),
]
DRAIN_ROWS = [
    ("drainer_strace", "drainer, `run --format strace`, on the demo, per record written "
     "(issue 23)", "1,130", ("<=", 600)),
    ("drainer_binary", "drainer, `run --format binary`, on the demo, per record written "
     "(issue 23)", "591", ("<=", 60)),
    ("convert_binary_strace", "`convert` binary -> strace, per record (issue 23)", "870",
     ("<=", 500)),
]
NOT_HERE = {"quill": "Quill is not packaged in Debian (the target's figure came from a source "
                     "build); not measured by bench/run"}


def read_tsv(path):
    rows = {}
    if os.path.exists(path):
        with open(path, newline="") as f:
            for r in csv.reader(f, delimiter="\t"):
                if r:
                    rows[r[0]] = r[1:] + [""] * (4 - len(r))
    return rows


def verdict(value, target):
    if target is None:
        return "-", "anchor"
    op, lim = target
    ok = value <= lim if op == "<=" else value >= lim
    if ok:
        return f"{op} {lim:g}", "**met**"
    by = value / lim if op == "<=" else lim / value
    return f"{op} {lim:g}", f"**missed** ({by:.2f}x)"


def fmt_num(v):
    return f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"


def instruction_table(d):
    ir = read_tsv(os.path.join(d, "ir.tsv"))
    dr = read_tsv(os.path.join(d, "ir-drainer.tsv"))
    out = ["| arm | Ir / record | baseline | target | result |",
           "|---|---:|---:|---|---|"]
    val = {}
    for arm, what, base, target in IR_ROWS:
        r = ir.get(arm)
        if r is None or not r[0]:
            why = NOT_HERE.get(arm) or (r[2] if r else "not run")
            out.append(f"| {what} | not measured: {why} | {base} | "
                       f"{verdict(0, target)[0] if target else '-'} | "
                       f"{'not measured' if target else 'anchor'} |")
            continue
        v = float(r[0])
        val[arm] = v
        t, res = verdict(v, target)
        out.append(f"| {what} | {fmt_num(v)} | {base} | {t} | {res} |")
        if arm == "spanring_span" and r[1]:
            slots = float(r[1])
            ok = slots <= 1.0
            out.append(f"| the same, ring slots per record | {slots:.3f} | 2 | <= 1 | "
                       f"{'**met**' if ok else f'**missed** ({slots:.2f}x)'} |")
    if "lttng_ust" in val and "spanring_span" in val:
        ratio = val["lttng_ust"] / val["spanring_span"]
        t, res = verdict(ratio, (">=", 20))
        out.append(f"| LTTng-UST / spanring `Span`, same run (issue 20) | {ratio:.1f} | 5.3 | "
                   f"{t} | {res} |")
    else:
        out.append("| LTTng-UST / spanring `Span`, same run (issue 20) | not measured (no LTTng "
                   "arm) | 5.3 | >= 20 | not measured |")
    if "write_strace_file" in val and "spanring_span" in val:
        out.append(f"| `[STRACE]` line / spanring `Span` | "
                   f"{val['write_strace_file'] / val['spanring_span']:.1f} | 19.6 | - | anchor |")
    for name, what, base, target in DRAIN_ROWS:
        r = dr.get(name)
        if r is None or not r[0]:
            out.append(f"| {what} | not measured | {base} | {verdict(0, target)[0]} | "
                       "not measured |")
            continue
        v = float(r[0])
        t, res = verdict(v, target)
        out.append(f"| {what} ({r[1]} records) | {fmt_num(v)} | {base} | {t} | {res} |")
    return out


def load_runs(d, stem):
    runs = []
    k = 1
    while True:
        p = os.path.join(d, f"{stem}-{k}.json")
        if not os.path.exists(p):
            # a failed run leaves a gap; look a little further
            if not any(os.path.exists(os.path.join(d, f"{stem}-{j}.json"))
                       for j in range(k + 1, k + 4)):
                break
            runs.append(None)
        else:
            try:
                with open(p) as f:
                    runs.append(json.load(f))
            except (OSError, ValueError):
                runs.append(None)
        k += 1
    return runs


def record_metrics(j):
    p50 = {a["name"]: a.get("p50_ns") for a in j.get("arms", [])}
    m = {}
    if p50.get("spanring_span") and p50.get("floor"):
        m["span_floor"] = p50["spanring_span"] / p50["floor"]
    if p50.get("spanring_span") and p50.get("lttng_ust"):
        m["lttng_span"] = p50["lttng_ust"] / p50["spanring_span"]
    if p50.get("spanring_span") and p50.get("write_strace_file"):
        m["write_span"] = p50["write_strace_file"] / p50["spanring_span"]
    return m


def drain_metrics(j):
    m = {}
    runs = j.get("runs", [])
    flat = [r for r in runs if r["format"] == "binary" and not r["paced"]]
    if flat:
        best = max(flat, key=lambda r: r["drained_rate"])
        m["binary_flat"] = best["drained_rate"]
        if best["drainer_cpu"] > 0:
            m["binary_flat_per_cpu"] = best["drained_rate"] / best["drainer_cpu"]
    for fmt, key in (("strace", "text_paced"), ("binary", "binary_paced")):
        paced = [r for r in runs if r["format"] == fmt and r["paced"]]
        if paced:
            # the worst of the producer counts: drops summed over window and whole run
            m[key + "_drops"] = max(max(r["window_drops"], r["dropped"]) for r in paced)
            m[key + "_rate"] = min(r["drained_rate"] for r in paced)
            m[key + "_offered"] = min(r["offered_rate"] for r in paced)
    idle = j.get("idle", {})
    if idle.get("seconds"):
        m["idle"] = idle["cpu_schedstat"]
    owned = j.get("idle_owners", {})
    if owned.get("seconds"):
        m["idle_owned"] = owned["cpu_schedstat"]
    return m


def l3_metrics(j):
    arms = {a["name"]: a for a in j.get("arms", [])}
    need = ("off", "spanring", "write", "spanring run -- /bin/true")
    if not all(n in arms and arms[n]["wall_s"] for n in need) or not j.get("spans"):
        return {}
    med = {n: (statistics.median(arms[n]["wall_s"]), statistics.median(arms[n]["cpu_s"]))
           for n in need}
    spans = j["spans"]
    fixed_w, fixed_c = med["spanring run -- /bin/true"]
    off_w, off_c = med["off"]
    s_w = med["spanring"][0] - fixed_w - off_w
    s_c = med["spanring"][1] - fixed_c - off_c
    w_w = med["write"][0] - off_w
    m = {"l3_cpu_us": s_c / spans * 1e6,
         "l3_cpu_us_raw": (med["spanring"][1] - off_c) / spans * 1e6}
    if w_w > 0:
        m["l3_wall_share"] = s_w / w_w
        m["l3_wall_share_raw"] = (med["spanring"][0] - off_w) / w_w
    return m


def interference_metrics(j):
    # live / stopped p50 per (threads, arm): the drainer as the producer feels it
    return {f"intf_{r['arm']}_{r['threads']}": r.get("ratio") for r in j.get("results", [])}


def timing_table(d):
    per = {"record": load_runs(d, "record"), "drain": load_runs(d, "drain"),
           "l3": load_runs(d, "l3"), "interference": load_runs(d, "interference")}
    fn = {"record": record_metrics, "drain": drain_metrics, "l3": l3_metrics,
          "interference": interference_metrics}
    metrics = {k: [fn[k](j) if j else None for j in v] for k, v in per.items()}
    nruns = max((len(v) for v in per.values()), default=0)

    def series(bench, key):
        return [m.get(key) if m else None for m in metrics[bench]]

    def show(vals, f):
        return ", ".join("failed" if v is None else f(v) for v in vals) or "no run"

    def med(vals):
        got = [v for v in vals if v is not None]
        return statistics.median(got) if got else None

    # (target text, baseline, bench, key, comparison, limit, formatter, extra key)
    rows = [
        ("`Span` p50 / `floor` p50 (issue 20)", "1.6-2.9x", "record", "span_floor", "<=", 1.3,
         lambda v: f"{v:.2f}x"),
        ("LTTng-UST p50 / `Span` p50", "2.3", "record", "lttng_span", ">=", 5,
         lambda v: f"{v:.2f}"),
        ("`write_strace_file` p50 / `Span` p50", "21", "record", "write_span", ">=", 70,
         lambda v: f"{v:.1f}"),
        ("drainer, binary, flat out, records/s (best producer count; drainer pinned to one "
         "core; issue 23)", "2.5-5 M", "drain", "binary_flat", ">=", 20e6,
         lambda v: f"{v / 1e6:.2f} M"),
        ("drainer, paced 2 M/s text, drops at the default ring size (worst producer count)",
         "2-4% dropped", "drain", "text_paced_drops", "<=", 0, lambda v: f"{v:.0f}"),
        ("drainer, paced 4 M/s binary, drops at the default ring size (worst producer count)",
         "-", "drain", "binary_paced_drops", "<=", 0, lambda v: f"{v:.0f}"),
        ("idle drainer, share of a core (schedstat)", "0.175-0.6%", "drain", "idle", "<", 0.005,
         lambda v: f"{v * 100:.3f}%"),
        ("idle drainer with 256 silent owners, share of a core (schedstat)", "1.2-1.4%", "drain",
         "idle_owned", "<", 0.005, lambda v: f"{v * 100:.3f}%"),
    ] + [
        (f"producer p50, drainer running / stopped, `{arm}`, {t} thread{'s' if t > 1 else ''}",
         "1.35-1.76x", "interference", f"intf_{arm}_{t}", "<=", 1.15, lambda v: f"{v:.3f}x")
        for t in (1, 16) for arm in ("Span", "emit")
    ] + [
        ("`bench_l3`: spanring's added CPU per record, every process and the drainer, fixed "
         "cost of `spanring run` subtracted", "1.6 us", "l3", "l3_cpu_us", "<=", 0.4,
         lambda v: f"{v:.3f} us"),
        ("`bench_l3`: spanring's added wall per record / the write(2) path's, fixed cost "
         "subtracted", "27%", "l3", "l3_wall_share", "<=", 0.10, lambda v: f"{v * 100:.1f}%"),
    ]
    out = [f"| target | baseline | runs ({nruns}) | median | limit | result |",
           "|---|---:|---|---:|---:|---|"]
    for text, base, bench, key, op, lim, f in rows:
        vals = series(bench, key)
        m = med(vals)
        limit = f"{op} {f(lim)}"
        if m is None:
            out.append(f"| {text} | {base} | {show(vals, f)} | - | {limit} | not measured |")
            continue
        ok = {"<=": m <= lim, "<": m < lim, ">=": m >= lim}[op]
        if m < 0:
            # an added cost below zero: the runs' noise is larger than what is measured
            out.append(f"| {text} | {base} | {show(vals, f)} | {f(m)} | {limit} | "
                       "inconclusive (negative: noise larger than the effect; more "
                       "repetitions) |")
            continue
        if ok:
            res = "**met**"
        elif lim == 0:
            res = "**missed**"
        else:
            res = f"**missed** ({(m / lim if op != '>=' else lim / m):.2f}x)"
        out.append(f"| {text} | {base} | {show(vals, f)} | {f(m)} | {limit} | {res} |")
    # context the verdicts rest on
    notes = []
    pc = med(series("drain", "binary_flat_per_cpu"))
    if pc is not None:
        notes.append(f"binary flat out per drainer CPU-second (median): {pc / 1e6:.2f} M records")
    for key, name in (("text_paced_rate", "text"), ("binary_paced_rate", "binary")):
        r = med(series("drain", key))
        if r is not None:
            notes.append(f"paced {name} drained (median of the worst producer count): "
                         f"{r / 1e6:.2f} M/s")
    raw = med(series("l3", "l3_cpu_us_raw"))
    if raw is not None:
        notes.append(f"`bench_l3` CPU per record with the fixed cost of `spanring run`: "
                     f"{raw:.3f} us")
    raw = med(series("l3", "l3_wall_share_raw"))
    if raw is not None:
        notes.append(f"`bench_l3` wall share with the fixed cost: {raw * 100:.1f}%")
    if notes:
        out += ["", "Context: " + "; ".join(notes) + "."]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/targets.py DIR")
    d = sys.argv[1]
    print("### Instructions per record (callgrind; the targets)")
    print()
    print("\n".join(instruction_table(d)))
    print()
    print("### Time (same-run ratios and rates; median over the runs; the targets)")
    print()
    print("\n".join(timing_table(d)))
    print()


if __name__ == "__main__":
    main()
