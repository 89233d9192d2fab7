"""Spans of Python programs run under the built `spanring run`, read back from the trace."""
import json
import os
import subprocess

from conftest import SPANRING


def test_spans_are_named_ext_producer_name(traced):
    r = traced("""
        import spanring
        assert spanring.enabled() is True
        p = spanring.producer("pypto")
        assert p.enabled() is True
        with spanring.span("step"):
            pass
        with p.span("decode_layer"):
            pass
        with p.span("load.parse"):
            pass
    """)
    assert [s["name"] for s in r.spans] == [
        "ext.app.step", "ext.pypto.decode_layer", "ext.pypto.load.parse"]
    for s in r.spans:
        assert (s["inv"], s["hid"], s["depth"], s["attrs"]) == (0, "0", 0, "")
        assert s["pid"] == r.spans[0]["pid"]


def test_bad_names_and_keys_are_value_errors_when_traced_too(traced):
    r = traced("""
        import spanring
        errors = []
        for bad in ["", "a.b", "a b", "a=b", None]:
            try:
                spanring.producer(bad)
            except ValueError:
                errors.append(str(bad))
        for bad in [None, 7]:
            try:
                spanring.span(bad)
            except ValueError:
                errors.append("span " + str(bad))
        for key in ["a b", "1x"]:
            try:
                spanring.span("s", **{key: 1})
            except ValueError:
                errors.append(key)
        try:
            spanring.span("s", k=None)
        except TypeError:
            errors.append("None")
        with spanring.span("after"):
            pass
        import json
        json.dump(errors, open(SIDE, "w"))
    """)
    assert r.side == ["", "a.b", "a b", "a=b", "None", "span None", "span 7", "a b", "1x", "None"]
    assert [s["name"] for s in r.spans] == ["ext.app.after"]


def test_a_span_is_a_context_manager_that_records_through_an_exception(traced):
    r = traced("""
        import spanring, time
        with spanring.span("cm", batch=16) as s:
            assert type(s).__name__ == "Span"
            time.sleep(0.002)
        try:
            with spanring.span("raises"):
                raise KeyError("x")
        except KeyError:
            pass
        s = spanring.span("reused")
        for _ in range(2):
            with s:
                pass
    """)
    cm = r.one("ext.app.cm")
    assert cm["attrs"] == "batch=16"
    assert cm["dur"] >= 2_000_000
    assert len(r.named("ext.app.raises")) == 1
    assert len(r.named("ext.app.reused")) == 2


def test_a_span_decorates_functions_one_span_per_call(traced):
    r = traced("""
        import spanring
        p = spanring.producer("lib")

        @p.span("load", k=3)
        def load(x):
            '''doc'''
            return x * 2

        assert load.__name__ == "load" and load.__doc__ == "doc"
        assert [load(i) for i in range(3)] == [0, 2, 4]

        @spanring.span("rec")
        def rec(n):
            return 0 if n == 0 else 1 + rec(n - 1)
        assert rec(2) == 2
    """)
    loads = r.named("ext.lib.load")
    assert len(loads) == 3 and all(s["attrs"] == "k=3" for s in loads)
    assert sorted(s["depth"] for s in r.named("ext.app.rec")) == [0, 1, 2]


def test_a_decorated_async_def_is_timed_over_its_awaited_body(traced):
    r = traced("""
        import asyncio, spanring, time

        @spanring.span("fetch")
        async def fetch():
            await asyncio.sleep(0.010)
            return 7

        async def main():
            co = fetch()           # created here ...
            time.sleep(0.500)      # ... not timed while it waits to be awaited
            assert await co == 7

        asyncio.run(main())
    """)
    # The awaited body sleeps 10 ms; the 500 ms before it is awaited must not count. The bound
    # in between leaves a loaded machine ~390 ms of scheduling delay.
    dur = r.one("ext.app.fetch")["dur"]
    assert dur > 5_000_000, dur
    assert dur < 400_000_000, dur


def test_attribute_values_of_each_type_become_key_value_tokens(traced):
    r = traced("""
        import spanring
        with spanring.span("attrs", i=7, neg=-3, zero=0, big=2**64 + 1, u=2**64 - 1,
                           f=0.5, tiny=1e-05, whole=2.0, yes=True, no=False,
                           s="abc", e="caf\\u00e9", br="[x]%"):
            pass
        with spanring.span("many", a1=1, a2=2, a3=3, a4=4, a5=5, a6=6, a7=7, a8="x"):
            pass
    """)
    assert r.one("ext.app.attrs")["attrs"] == (
        "i=7 neg=-3 zero=0 big=18446744073709551617 u=18446744073709551615 f=0.5 tiny=1e-05 "
        "whole=2.0 yes=True no=False s=abc e=caf%C3%A9 br=%5Bx%5D%25")
    assert r.one("ext.app.many")["attrs"] == "a1=1 a2=2 a3=3 a4=4 a5=5 a6=6 a7=7 a8=x"


def test_nesting_gives_depth_and_invocation_sets_inv_and_hid(traced):
    r = traced("""
        import spanring
        with spanring.span("outer"):
            with spanring.invocation(42, 0x9f3c2a1b5d7e6f01):
                with spanring.span("mid"):
                    with spanring.invocation(7):
                        with spanring.span("inner"):
                            pass
                    with spanring.span("mid2"):
                        pass
        with spanring.span("after"):
            pass
    """)
    got = {s["name"]: (s["depth"], s["inv"], s["hid"]) for s in r.spans}
    assert got == {
        "ext.app.outer": (0, 0, "0"),
        "ext.app.mid": (1, 42, "9f3c2a1b5d7e6f01"),
        "ext.app.inner": (2, 7, "0"),
        "ext.app.mid2": (2, 42, "9f3c2a1b5d7e6f01"),
        "ext.app.after": (0, 0, "0"),
    }
    outer, inner = r.one("ext.app.outer"), r.one("ext.app.inner")
    assert outer["ts"] <= inner["ts"]
    assert inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def test_spans_lie_between_now_ns_reads_and_inside_a_cpp_span(traced):
    # span_scope (span_scope.cpp) opens a spanring::Span from C++ through ctypes; the Python span
    # inside it is its child on the same thread, timed by the same clock.
    r = traced(f"""
        import ctypes, json, spanring
        lib = ctypes.CDLL({os.environ["SPAN_SCOPE_LIB"]!r})
        lib.span_scope_begin.restype = ctypes.c_void_p
        lib.span_scope_begin.argtypes = [ctypes.c_char_p]
        lib.span_scope_end.argtypes = [ctypes.c_void_p]
        reads = []
        for i in range(50):
            name = b"cpp.outer"
            h = lib.span_scope_begin(name)
            before = spanring.now_ns()
            with spanring.span("inner", i=i):
                sum(range(i * 100))
            after = spanring.now_ns()
            lib.span_scope_end(h)
            reads.append((before, after))
        json.dump(reads, open(SIDE, "w"))
    """)
    outers = r.named("cpp.outer")
    inners = sorted(r.named("ext.app.inner"), key=lambda s: int(s["attr"]["i"]))
    assert len(outers) == len(inners) == 50
    outers.sort(key=lambda s: s["ts"])
    for (before, after), inner, outer in zip(r.side, inners, outers):
        assert inner["depth"] == 1 and outer["depth"] == 0
        assert inner["tid"] == outer["tid"]
        assert before <= inner["ts"] and inner["ts"] + inner["dur"] <= after
        assert outer["ts"] <= inner["ts"]
        assert inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def test_each_thread_has_its_own_ring_named_after_its_python_name(traced, tmp_path):
    r = traced("""
        import json, os, spanring, threading
        tids = {}
        def work(n):
            tids[threading.current_thread().name] = threading.get_native_id()
            for i in range(n):
                with spanring.span("work", i=i):
                    pass
        threads = [threading.Thread(target=work, args=(100,), name=f"worker-{c}") for c in "ab"]
        threads.append(threading.Thread(target=work, args=(3,)))  # Thread-1 (work)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with spanring.span("main"):
            tids["MainThread"] = threading.get_native_id()
        json.dump({"pid": os.getpid(), "tids": tids}, open(SIDE, "w"))
    """, fmt="binary")
    chrome = tmp_path / "t.json"
    subprocess.run([SPANRING, "convert", str(r.trace), "--to", "chrome", "-o", str(chrome)],
                   check=True, timeout=60)
    events = json.loads(chrome.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    pid = r.side["pid"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] == pid}
    # A thread name is cut at 16 bytes (the kernel's TASK_COMM_LEN, as the ring stores it).
    expected = {tid: name[:16] for name, tid in r.side["tids"].items()}
    assert len(expected) == 4
    assert names == expected
    spans_by_tid = {}
    for e in events:
        if e.get("ph") == "X" and e["pid"] == pid:
            spans_by_tid.setdefault(e["tid"], []).append(e["name"])
    assert sorted(len(v) for v in spans_by_tid.values()) == [1, 3, 100, 100]
    strace = subprocess.run([SPANRING, "convert", str(r.trace), "--to", "strace"],
                            check=True, timeout=60, capture_output=True, text=True).stdout
    assert strace.count("name=ext.app.work ") == 203


def test_a_span_left_on_another_thread_is_not_recorded_and_warns(traced):
    r = traced("""
        import json, threading, warnings, spanring

        def gen():
            with spanring.span("gen"):
                yield 1

        g = gen()
        next(g)                      # the span begins on the main thread ...
        caught = []
        def finish():
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                g.close()            # ... and its with block ends on another one
            caught.extend(str(x.message) for x in w)
        t = threading.Thread(target=finish)
        t.start()
        t.join()
        with spanring.span("other_thread_ok"):
            pass
        json.dump(caught, open(SIDE, "w"))
    """)
    assert len(r.side) == 1 and "another thread" in r.side[0]
    assert r.named("ext.app.gen") == []
    # The main thread still counts the unrecorded span open (docs/python.md, Threads).
    assert r.one("ext.app.other_thread_ok")["depth"] == 1


def test_a_span_left_by_an_exited_thread_is_not_ended_on_the_next_thread(traced):
    # glibc gives a new thread the pthread_t of one that exited, so a thread's identity must be
    # one no later thread can have: a span and an invocation left open by an exited thread,
    # ended on the next thread (which may get the same pthread_t), warn and record nothing;
    # that thread's own spans keep their depth and invocation. Twenty rounds: the pthread_t of
    # a joined thread is reused most of the time.
    r = traced("""
        import json, threading, warnings, spanring

        def gen():
            with spanring.span("gen"):
                yield 1

        caught = []
        for _ in range(20):
            left = {}
            def begin():
                g = gen()
                next(g)              # the span begins on this thread, which then exits
                inv = spanring.invocation(42, 0x42)
                inv.__enter__()
                left["g"], left["inv"] = g, inv
            t = threading.Thread(target=begin)
            t.start()
            t.join()
            def finish():
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    with spanring.invocation(5, 0x5):
                        with spanring.span("before"):
                            pass
                        left["g"].close()
                        left["inv"].__exit__(None, None, None)
                        with spanring.span("after"):
                            pass
                caught.extend(str(x.message) for x in w)
            t = threading.Thread(target=finish)
            t.start()
            t.join()
        json.dump(caught, open(SIDE, "w"))
    """)
    assert len(r.side) == 40 and all("another thread" in m for m in r.side)
    assert r.named("ext.app.gen") == []
    for name in ("ext.app.before", "ext.app.after"):
        spans = r.named(name)
        assert len(spans) == 20
        for s in spans:
            assert (s["inv"], s["hid"], s["depth"]) == (5, "5", 0), s
