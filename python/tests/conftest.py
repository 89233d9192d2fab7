"""Helpers of the python suite: run a Python program under the built `spanring run` and read
its trace.

SPANRING_EXE names the built CLI (build/cli/spanring); PYTHONPATH points at the build tree's
package, and the traced program inherits both, so it imports the spanring just built.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

SPANRING = os.environ.get("SPANRING_EXE", "")

# One [STRACE] line (shared/strace-format.md): the fixed fields in order, then the attributes.
STRACE = re.compile(
    r"\[STRACE\] v=1 pid=(\d+) tid=(\d+) inv=(\d+) hid=([0-9a-f]+) depth=(\d+) name=(\S+) "
    r"ts=(\d+) dur=(\d+) (.*)$")


def parse_strace(text):
    """The spans of a [STRACE] text: a list of dicts (pid, tid, inv, hid, depth, name, ts, dur,
    attrs: the raw attribute text, attr: key -> encoded value)."""
    spans = []
    for line in text.splitlines():
        if "[STRACE]" not in line:
            continue
        m = STRACE.search(line)
        assert m, "not a [STRACE] line: " + line
        pid, tid, inv, hid, depth, name, ts, dur, attrs = m.groups()
        spans.append({
            "pid": int(pid), "tid": int(tid), "inv": int(inv), "hid": hid, "depth": int(depth),
            "name": name, "ts": int(ts), "dur": int(dur), "attrs": attrs,
            "attr": dict(tok.split("=", 1) for tok in attrs.split()),
        })
    return spans


class Run:
    """A finished traced run: the spans, the program's JSON side output, the CLI's stderr."""

    def __init__(self, spans, side, stderr, trace):
        self.spans = spans
        self.side = side
        self.stderr = stderr
        self.trace = trace

    def named(self, name):
        return [s for s in self.spans if s["name"] == name]

    def one(self, name):
        found = self.named(name)
        assert len(found) == 1, f"{name}: {len(found)} spans in {self.spans}"
        return found[0]


@pytest.fixture
def traced(tmp_path):
    """traced(code, fmt="strace") runs `code` (a Python program; `SIDE` in its globals is a
    path it may write JSON to) under `spanring run`, asserts both exit 0 with nothing lost, and
    returns a Run."""
    if not SPANRING:
        pytest.skip("SPANRING_EXE is not set (run through meson test)")

    def run(code, fmt="strace", args=()):
        prog = tmp_path / "prog.py"
        side = tmp_path / "side.json"
        prog.write_text(f"SIDE = {str(side)!r}\n" + textwrap.dedent(code))
        trace = tmp_path / ("t.strace" if fmt == "strace" else "t.sptrace")
        r = subprocess.run(
            [SPANRING, "run", "--fail-on-loss", "-o", str(trace), "--format", fmt, "--",
             sys.executable, str(prog), *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        spans = parse_strace(trace.read_text()) if fmt == "strace" else []
        side_data = json.loads(side.read_text()) if side.exists() else None
        return Run(spans, side_data, r.stderr, trace)

    return run


def untraced_env():
    env = dict(os.environ)
    env.pop("SPANRING_SEGMENT", None)
    return env
