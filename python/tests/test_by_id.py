"""The id path (python/spanring/_spanring.cpp: a span whose name and keys the producer's name
cache holds ids for, recorded as an IdSpan) writes the same [STRACE] lines as the Span path
(every span through a spanring::Span, as the package did before the id path): one workload
run twice under `spanring run`, once with the id path and once without (_set_by_id(False)),
gives the same lines but for the times, and each run took the path it was meant to."""
import re

# Every case runs 3 times: a name (and keyword-name tuple) is interned the second time the same
# object is seen, so the first round takes the Span path in both runs, the others the id path.
WORKLOAD = """
import enum, json, os, sys, spanring
from spanring import _spanring

_spanring._set_by_id(sys.argv[1] == "on")
p = spanring.producer("pb")
q = spanring.producer("q\\u00e9")
long_name = "n" * 70                 # past kStringMaxBytes and the 64-byte name cap
edge_name = "e" * (64 - len("ext.pb."))  # a full name of exactly 64 bytes
long_key = "k" * 70
# Literal keyword names (a call's keyword-name tuple is a constant of its code object only when
# written out): a non-ASCII key, and 3 long keys whose text is cut at the 192-byte cap (inside
# the last value, so that every token keeps its `=`).
exec("def kw_span():\\n    with p.span('n\\u00e4me', k\\u00e9y=1):\\n        pass\\n")
key60 = ["k0" + "x" * 58, "k1" + "x" * 58, "k2" + "x" * 38]
exec("def key60_span():\\n    with p.span('key60', %s):\\n        pass\\n"
     % ", ".join("%s=%d" % kv for kv in zip(key60, (4000000000, -2000000000, 3000000000))))

class Color(enum.IntEnum):
    RED = 3

def deep(n):
    if n == 0:
        return
    with p.span("deep", level=n, neg=-n):
        deep(n - 1)

for rnd in range(3):
    with p.span("plain"):
        pass
    with p.span("ints", a=0, b=1, c=-1, d=2**31 - 1):
        pass
    with p.span("edges", a=-2**31, b=2**32 - 1, c=2**32, d=-2**31 - 1):
        pass
    with p.span("huge", big=2**64 + 1, neg=-2**70, u=2**64 - 1):
        pass
    with p.span("types", f=0.5, s="abc", t=True, n=False, e="caf\\u00e9", i=7):
        pass
    with p.span("enum", c=Color.RED):
        pass
    with p.span("five", a1=1, a2=2, a3=3, a4=4, a5=5):
        pass
    with p.span(long_name, k=1):
        pass
    with p.span(edge_name, k=1):
        pass
    kw_span()
    with p.span("nul\\x00x", k=1):
        pass
    with p.span("surr\\udc80", k=1):
        pass
    with q.span("other", k=2):
        pass
    with p.span("longkey", **{long_key: 1}):
        pass
    key60_span()
    try:
        with p.span("raises", k=5):
            raise KeyError("x")
    except KeyError:
        pass
    try:
        with p.span("none", k=None):
            pass
    except TypeError:
        pass
    with spanring.invocation(42, 0x9F3C2A1B5D7E6F01):
        with p.span("outer", k=1):
            with p.span("inner", k=2):
                pass
    deep(260)                        # depths past 255: no compact record

json.dump(_spanring._path_counts(), open(SIDE, "w"))
"""

# The fields that differ between two runs of the same program.
VARIABLE = [
    (re.compile(r"^\[mono_ns=\d+\]\[T0x[0-9a-f]+\]"), "[mono_ns=M][T0xT]"),
    (re.compile(r"\bpid=\d+ tid=\d+ "), "pid=P tid=T "),
    (re.compile(r"\bts=\d+ dur=\d+ "), "ts=S dur=D "),
]


def span_lines(run):
    out = []
    for line in run.trace.read_text().splitlines():
        if "[STRACE]" not in line:
            continue
        for pattern, repl in VARIABLE:
            line = pattern.sub(repl, line)
        out.append(line)
    return out


def test_the_id_path_writes_the_span_paths_lines(traced):
    # Each run's lines are read before the next run, which writes the same trace file.
    by_id = traced(WORKLOAD, args=("on",))
    lines_id = span_lines(by_id)
    by_span = traced(WORKLOAD, args=("off",))
    lines_span = span_lines(by_span)
    # 18 spans per round (the `none` one is refused) and 260 deep ones, 3 rounds, all kept.
    assert len(lines_span) == 3 * (18 + 260)
    assert lines_id == lines_span
    # Each run took its path: the id path from the second round on, including ordinary records
    # for the spans deeper than 255.
    assert by_span.side["by_id"] == 0
    assert by_id.side["by_id"] > 2 * 260
    assert by_id.side["by_id_text"] >= 2 * 4
    # What the lines say, for the cases the id path must leave to the Span path or cut.
    spans = by_id.spans  # parsed when that run ended
    attrs = {}
    for s in spans:
        attrs.setdefault(s["name"], set()).add(s["attrs"])
    assert attrs["ext.pb.ints"] == {"a=0 b=1 c=-1 d=2147483647"}
    assert attrs["ext.pb.edges"] == {"a=-2147483648 b=4294967295 c=4294967296 d=-2147483649"}
    assert attrs["ext.pb.huge"] == {
        "big=18446744073709551617 neg=-1180591620717411303424 u=18446744073709551615"}
    assert attrs["ext.pb.types"] == {"f=0.5 s=abc t=True n=False e=caf%C3%A9 i=7"}
    assert attrs["ext.pb.enum"] == {"c=3"}
    assert attrs["ext.pb.n%C3%A4me"] == {"k%C3%A9y=1"}
    assert attrs["ext.q%C3%A9.other"] == {"k=2"}
    assert attrs["ext.pb.nul"] == {"k=1"}
    assert attrs["ext.pb." + "e" * 57] == {"k=1"}
    assert attrs["ext.pb." + "n" * 56 + "~"] == {"k=1"}
    [key60] = attrs["ext.pb.key60"]
    assert len(key60) == 192 and key60.endswith("~")
    deep = [s for s in spans if s["name"] == "ext.pb.deep"]
    assert sorted({s["depth"] for s in deep}) == list(range(260))
    assert all(s["attrs"] == "level=%d neg=-%d" % (260 - s["depth"], 260 - s["depth"])
               for s in deep)
    inner = [s for s in spans if s["name"] == "ext.pb.inner"]
    assert {(s["inv"], s["hid"], s["depth"]) for s in inner} == {(42, "9f3c2a1b5d7e6f01", 1)}


def test_a_forked_child_records_by_id_under_its_own_pid(traced):
    r = traced("""
        import json, os, spanring
        from spanring import _spanring
        p = spanring.producer("f")
        for _ in range(3):
            with p.span("step", k=1):
                pass
        parent = _spanring._path_counts()
        pid = os.fork()
        if pid == 0:
            for _ in range(2):
                with p.span("step", k=2):
                    pass
            c = _spanring._path_counts()
            json.dump({"child": os.getpid(), "by_id": c["by_id"] - parent["by_id"]},
                      open(SIDE, "w"))
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    # The child inherited the name cache (the same segment, the same ids) and used it.
    assert r.side["by_id"] == 2
    child = [s for s in r.named("ext.f.step") if s["attr"]["k"] == "2"]
    assert len(child) == 2 and {s["pid"] for s in child} == {r.side["child"]}
    parent = [s for s in r.named("ext.f.step") if s["attr"]["k"] == "1"]
    assert len(parent) == 3 and r.side["child"] not in {s["pid"] for s in parent}


def test_enter_and_exit_bind_like_methods(traced):
    r = traced("""
        import spanring
        from spanring import _spanring
        S = _spanring.Span
        p = spanring.producer("m")
        s = p.span("unbound", k=1)
        S.__enter__(s)
        S.__exit__(s, None, None, None)      # on the type: the plain method descriptors
        try:
            S.__dict__["__enter__"].__get__(5)
            raise AssertionError("bound to an int")
        except TypeError:
            pass
        enter, exit_ = p.span("kept", k=2).__enter__, p.span("kept", k=3).__exit__
        assert enter() is not None           # the bound methods keep their spans alive
        try:
            enter(1)
            raise AssertionError("__enter__ took an argument")
        except TypeError:
            pass
        assert exit_(None, None, None) is False
        for i in range(5):                   # bound objects reused with their span objects
            with p.span("loop", i=i) as sp:
                assert sp.__exit__ is not sp.__exit__
    """)
    assert [s["attrs"] for s in r.named("ext.m.unbound")] == ["k=1"]
    # exit_ ends a span that was never entered: nothing; enter() began "kept" k=2, which is
    # recorded when its span object is freed (at exit), as any span left open.
    assert [s["attrs"] for s in r.named("ext.m.kept")] == ["k=2"]
    assert sorted(s["attrs"] for s in r.named("ext.m.loop")) == ["i=%d" % i for i in range(5)]
