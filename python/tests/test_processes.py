"""Children made by os.fork and multiprocessing (fork and spawn) are traced under their own pid;
a program outside `spanring run` is not traced at all."""
import subprocess
import sys
import textwrap

from conftest import untraced_env


def test_an_os_fork_child_is_traced_under_its_own_pid(traced):
    r = traced("""
        import json, os, spanring
        with spanring.span("before_fork"):
            pass
        with spanring.span("around_fork"):
            pid = os.fork()
            if pid == 0:
                with spanring.span("in_child", me=os.getpid()):
                    pass
                os._exit(0)
            os.waitpid(pid, 0)
        with spanring.span("after_fork"):
            pass
        json.dump({"parent": os.getpid(), "child": pid}, open(SIDE, "w"))
    """)
    parent, child = r.side["parent"], r.side["child"]
    assert r.one("ext.app.before_fork")["pid"] == parent
    assert r.one("ext.app.after_fork")["pid"] == parent
    in_child = r.one("ext.app.in_child")
    assert (in_child["pid"], in_child["tid"], in_child["attr"]["me"]) == (child, child, str(child))
    # The child inherited the open around_fork span: its own span is one deeper.
    assert in_child["depth"] == 1
    around = r.named("ext.app.around_fork")
    # around_fork ended in the parent and, as the child's copy, not at all (os._exit inside the
    # with block): one record, the parent's.
    assert [s["pid"] for s in around] == [parent]


MP_PROGRAM = """
    import json, multiprocessing as mp, os, sys, spanring

    def child(q, i, worker):
        with worker.span("task", i=i):
            q.put((i, os.getpid(), spanring.enabled()))

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        q = ctx.Queue()
        with spanring.span("parent"):
            worker = spanring.producer("worker")  # pickled to spawned children
            procs = [ctx.Process(target=child, args=(q, i, worker)) for i in range(3)]
            for p in procs:
                p.start()
            got = sorted(q.get(timeout=30) for _ in procs)
            for p in procs:
                p.join()
        json.dump({"parent": os.getpid(), "children": got}, open(SIDE, "w"))
"""


def check_multiprocessing(r):
    parent = r.side["parent"]
    assert r.one("ext.app.parent")["pid"] == parent
    tasks = {int(s["attr"]["i"]): s for s in r.named("ext.worker.task")}
    assert sorted(tasks) == [0, 1, 2]
    pids = set()
    for i, pid, enabled in r.side["children"]:
        assert enabled is True
        assert pid != parent
        assert tasks[i]["pid"] == pid
        pids.add(pid)
    assert len(pids) == 3


def test_multiprocessing_fork_children_are_traced_under_their_own_pid(traced):
    check_multiprocessing(traced(MP_PROGRAM, args=["fork"]))


def test_multiprocessing_spawn_children_are_traced_under_their_own_pid(traced):
    r = traced(MP_PROGRAM, args=["spawn"])
    check_multiprocessing(r)
    # A spawned child is a new interpreter: depth starts again at 0.
    assert all(s["depth"] == 0 for s in r.named("ext.worker.task"))


def test_outside_spanring_run_nothing_is_traced(tmp_path):
    prog = textwrap.dedent("""
        import spanring
        assert not spanring.enabled()
        with spanring.span("x", k=1):
            pass
        @spanring.span("f")
        def f():
            return 3
        assert f() == 3
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", prog], env=untraced_env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, "ok\n", "")
