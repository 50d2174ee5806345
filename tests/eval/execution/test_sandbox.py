"""Generated code runs for real, contained: canonical HumanEval solutions pass, hostile programs do not."""

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from ferrylm.cli import main
from ferrylm.eval.execution.sandbox import Sandbox, SandboxError, run_program
from ferrylm.eval.tasks.humaneval import SamplesError, completion_from_reply, execute, load_problems
from ferrylm.eval.tasks.score import score

ROOT = os.geteuid() == 0


def test_all_canonical_solutions_pass_and_wrong_ones_fail():
    problems = load_problems()
    assert len(problems) == 164
    canonical = execute(problems, [(p["task_id"], p["canonical_solution"]) for p in problems], 10, 1024, 2)
    assert sum(r["passed"] for r in canonical) == 164
    wrong = execute(problems[:20], [(p["task_id"], "    return None\n") for p in problems[:20]], 10, 1024, 2)
    assert sum(r["passed"] for r in wrong) == 0


def test_basic_outcomes():
    assert run_program("pass") == "passed"
    assert run_program("assert 1 == 2").startswith("failed: AssertionError")
    t = time.monotonic()
    assert run_program("while True: pass", timeout_s=1) == "timed out"
    assert time.monotonic() - t < 5
    assert run_program("x = bytearray(4 << 30)", memory_mb=256).startswith("failed: MemoryError")
    assert (
        run_program("import os; assert 'PYTHONPATH' not in os.environ and os.environ['HOME'] == os.getcwd()")
        == "passed"
    )


def test_a_compiler_that_crashes_is_named_and_a_program_that_crashes_is_killed():
    crash = ["/bin/sh", "-c", "echo 'LLVM ERROR: out of memory' >&2; kill -ABRT $$"]
    assert (
        run_program({"files": {}, "steps": [crash, ["/bin/true"]]})
        == "failed: compile step sh failed (signal SIGABRT): LLVM ERROR: out of memory"
    )
    assert run_program({"files": {}, "steps": [["/bin/true"], crash]}) == "failed: killed by SIGABRT"


EARLY_EXITS = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "raise SystemExit": "raise SystemExit\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "SIGKILL to itself": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "SIGTERM to its group": "import os, signal\nos.killpg(0, signal.SIGTERM)\n",
    "closes the harness's fds": "import os\nos.closerange(3, 1024)\n",
    "main guard": "def main():\n    return 0\n\nif __name__ == '__main__':\n    import sys\n    sys.exit(main())\n",
}


@pytest.mark.parametrize("name", EARLY_EXITS)
def test_an_early_exit_after_a_wrong_body_fails(name):
    """A wrong body followed by an exit with status 0 must not pass: only the tests running to the
    end do (the reference harness fails these too)."""
    p = load_problems()[2]  # truncate_number: `return number % 1.0`
    wrong = "    return -1.0\n" + "".join("    " + line + "\n" for line in EARLY_EXITS[name].splitlines())
    result = execute([p], [(p["task_id"], wrong)], 10, 1024, 1)[0]
    assert not result["passed"] and result["result"].startswith("failed: "), result
    right = execute([p], [(p["task_id"], p["canonical_solution"])], 10, 1024, 1)[0]
    assert right["passed"]


def test_early_exit_reasons_are_named():
    assert run_program("import sys; sys.exit(0)") == "failed: exited before the tests finished (SystemExit: 0)"
    assert run_program("import os; os._exit(0)") == "failed: exited before the tests finished (exit code 0)"
    assert run_program("import os, signal; os.kill(os.getpid(), signal.SIGKILL)") == "failed: killed by SIGKILL"


@pytest.fixture
def box():
    with Sandbox(2, timeout_s=3) as b:
        yield b


def test_no_network(box):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        out = box.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n")
    assert out.status.startswith("failed:") and out.isolation.startswith("bwrap")


@pytest.mark.parametrize("where", ["/tmp", "/run"])
def test_no_unix_sockets_of_the_host(box, where):
    if where == "/run" and not os.access("/run", os.W_OK):
        pytest.skip("/run is not writable here")
    path = Path(where) / f"ferrylm-test-{os.getpid()}.sock"
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(str(path))
        srv.listen()
        try:
            code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\n"
            out = box.run(code)
            abstract = box.run("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0ferrylm-abstract')\n")
        finally:
            path.unlink()
    assert out.status.startswith("failed: FileNotFoundError"), out
    assert abstract.status.startswith("failed: ConnectionRefusedError"), abstract


def test_the_host_filesystem_is_not_there(box):
    here = Path(__file__).resolve()
    beside_python = Path(sys.base_prefix).resolve().parent / f"ferrylm-test-{os.getpid()}"  # e.g. under /root
    beside_python.write_text("the evaluator's")
    try:
        root = next(p for p in here.parents if (p / "pyproject.toml").is_file())
        for path in (here, root, "/etc/passwd", "/var/lib", "/run", beside_python):
            out = box.run(f"import os\nos.stat({str(path)!r})\n")
            assert out.status.startswith("failed: FileNotFoundError"), (path, out)
    finally:
        beside_python.unlink()
    # The interpreter is there, read-only.
    assert box.run("import os, json, sys\nassert not os.access(sys.prefix, os.W_OK)\n").status == "passed"


@pytest.mark.parametrize("where", ["/tmp", "/var/tmp", "/run/lock", "/dev/shm"])
def test_writes_outside_its_directory_do_not_land(box, where):
    marker = f"{where}/ferrylm-escape-{os.getpid()}"
    box.run(f"import os\nos.makedirs({where!r}, exist_ok=True)\nopen({marker!r}, 'w').write('x')\n")
    assert not os.path.exists(marker)


def test_nothing_of_the_evaluators_environment_gets_in(tmp_path, monkeypatch):
    """Every route a program has to the evaluator's variables comes back empty, and so does the
    results file, which carries the programs' last stderr line."""
    secret = "ferrylm-test-secret-" + os.urandom(6).hex()
    monkeypatch.setenv("FERRYLM_TEST_SECRET", secret)
    routes = [
        "import os; print(dict(os.environ), file=sys.stderr)",
        "print(open('/proc/self/environ', 'rb').read(), file=sys.stderr)",
        "import ctypes; ctypes.CDLL(None).prctl(4, 1, 0, 0, 0); print(open('/proc/self/environ', 'rb').read(), file=sys.stderr)",
        "import os; print([open(f'/proc/{p}/environ', 'rb').read() for p in os.listdir('/proc') if p.isdigit()], file=sys.stderr)",
        "import os; print([open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()], file=sys.stderr)",
        "import gc; print(repr(gc.get_objects())[-4000:], file=sys.stderr)",
    ]
    samples = tmp_path / "samples.jsonl"
    task = load_problems(1)[0]["task_id"]
    samples.write_text(
        "".join(
            json.dumps(
                {
                    "task_id": task,
                    "completion": f"    import sys\n    try:\n        {r}\n"
                    f"    except Exception as e:\n        print(e, file=sys.stderr)\n"
                    f"    raise SystemExit(1)\n",
                }
            )
            + "\n"
            for r in routes
        )
    )
    score("humaneval", samples)
    text = (tmp_path / "samples.jsonl_results.jsonl").read_text()
    assert secret not in text and len(text.splitlines()) == len(routes)


def test_cannot_kill_its_parent(box):
    out = box.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    assert out.status.startswith("failed: PermissionError")


def test_fork_bomb_and_orphans_are_contained(box):
    t = time.monotonic()
    out = box.run("import os\nwhile True:\n    os.fork()\n")
    assert out.status != "passed" and time.monotonic() - t < 10
    # A child that outlives the timeout goes, even one that left the program's session.
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\ntime.sleep(60)\n"
    assert box.run(code).status == "timed out"
    deadline = time.monotonic() + 10  # SIGKILLed processes take a moment to be reaped
    while (
        leftovers := [p for p in os.listdir("/proc") if p.isdigit() and _uid(p) in box.uids]
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers == []


def _uid(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
    except (OSError, StopIteration):
        return -1


def test_isolation_level_is_recorded(box):
    assert box.run("pass").isolation == ("bwrap+uid" if ROOT else "bwrap")


def test_without_bubblewrap_it_refuses_unless_asked(monkeypatch):
    import ferrylm.eval.execution.sandbox as sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="needs bubblewrap .* eval.exec_unconfined=true"):
        Sandbox(1)
    with Sandbox(1, unconfined=True) as loose:
        out = loose.run("import sys; sys.exit(0)")
    assert out.isolation == "unconfined" and out.status.startswith("failed: exited before the tests finished")


def test_bad_arguments_are_one_line(tmp_path, capsys):
    f = tmp_path / "s.jsonl"
    f.write_text('{"task_id": "HumanEval/0", "completion": "    return 1\\n"}\n')
    for flags in (["--workers", "0"], ["--timeout", "0"]):
        assert main(["eval", "humaneval", "--samples", str(f), *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith("ferrylm: error: --timeout must be > 0") and err.count("\n") == 1


def test_chat_replies_become_completions():
    p = load_problems(1)[0]
    body = p["canonical_solution"]
    whole = p["prompt"] + body
    for reply in (f"```python\n{body}```", f"Here you go:\n```python\n{whole}```\nDone."):
        c = completion_from_reply(p, reply)
        assert execute([p], [(p["task_id"], c)], 10, 1024, 1)[0]["passed"]


def test_score_sample_file_with_several_samples_per_task(tmp_path, capsys):
    problems = load_problems(2)
    f = tmp_path / "samples.jsonl"
    lines = []
    for p, good in zip(problems, (3, 1)):  # task 0: 3 of 4 correct, task 1: 1 of 4
        lines += [{"task_id": p["task_id"], "completion": p["canonical_solution"]}] * good
        lines += [{"task_id": p["task_id"], "completion": "    return 0\n"}] * (4 - good)
    f.write_text("".join(json.dumps(line) + "\n" for line in lines))
    res = score("humaneval", f)
    assert (res["tasks"], res["samples"], res["passed_samples"]) == (2, 8, 4)
    assert res["pass@1"] == pytest.approx((0.75 + 0.25) / 2)
    assert "pass@10" not in res  # k > n is not estimated
    assert main(["eval", "humaneval", "--samples", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["pass@1"] == pytest.approx(0.5)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "HumanEval/0"}\n')
    with pytest.raises(SamplesError, match="bad.jsonl:1: expected a JSON object"):
        score("humaneval", bad)
    assert main(["eval", "humaneval", "--samples", str(tmp_path / "none.jsonl")]) == 2


def test_programs_do_not_see_what_earlier_ones_left():
    with Sandbox(1, timeout_s=3) as one:
        assert one.run("open('/tmp/left-behind', 'w').write('x')").status == "passed"
        assert one.run("import os\nassert not os.path.exists('/tmp/left-behind')").status == "passed"
        # A program that takes its worker down costs only itself: the slot gets a new worker.
        one.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
        assert one.run("pass").status == "passed"


def test_every_python_task_passes_when_the_reply_wraps_the_canonical_solution():
    """All 164 HumanEval tasks: a reply that repeats the whole function (imports and the signature, in
    prose, with a usage line after it) passes wherever the bare canonical body passes."""
    problems = load_problems()
    wrapped = []
    for p in problems:
        whole = p["prompt"] + p["canonical_solution"]
        reply = f"Sure, here is the function:\n```python\nimport math\n{whole}\n\n# usage\nx = {p['entry_point']}\n```\nIt works."
        wrapped.append((p["task_id"], completion_from_reply(p, reply)))
    bare = [(p["task_id"], completion_from_reply(p, p["canonical_solution"])) for p in problems]
    results = execute(problems, bare + wrapped, 10, 1024, 2)
    verdicts = [r["passed"] for r in results]
    assert verdicts[:164] == verdicts[164:] and sum(verdicts[:164]) == 164


@pytest.mark.skipif(not ROOT, reason="programs get uids of their own only when ferrylm runs as root")
def test_two_sandboxes_at_once_never_share_a_uid():
    with Sandbox(2) as a, Sandbox(2) as b:
        assert a.uids and b.uids and not set(a.uids) & set(b.uids)
        assert a.run(f"import os\nassert os.getuid() in {a.uids!r}\n").status == "passed"
        assert b.run(f"import os\nassert os.getuid() in {b.uids!r}\n").status == "passed"
        taken = set(a.uids)
    with Sandbox(2) as c:  # a's block is free again once it closed
        assert set(c.uids) == taken


def test_a_directory_under_tmp_is_seen_in_the_sandbox():
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # a virtual environment or a clone under /tmp
        os.chmod(d, 0o755)
        (Path(d) / "mod.py").write_text("VALUE = 42\n")
        os.chmod(Path(d) / "mod.py", 0o644)
        with Sandbox(1, binds=(d,)) as box:
            code = f"import sys\nsys.path.insert(0, {d!r})\nimport mod\nassert mod.VALUE == 42\n"
            assert box.run(code).status == "passed"


def test_sandboxes_sharing_slots_take_turns():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    class Counted(threading.BoundedSemaphore):
        def __init__(self, n):
            super().__init__(n)
            self.inside = self.most = self.taken = 0

        def __enter__(self):
            super().__enter__()
            self.inside, self.taken = self.inside + 1, self.taken + 1
            self.most = max(self.most, self.inside)

        def __exit__(self, *exc):
            self.inside -= 1
            return super().__exit__(*exc)

    shared = Counted(1)  # one machine slot for two sandboxes of two slots each
    with Sandbox(2, shared=shared) as a, Sandbox(2, shared=shared) as b:
        with ThreadPoolExecutor(4) as pool:
            runs = list(pool.map(lambda box: box.run("import time\ntime.sleep(0.2)\n"), [a, b, a, b]))
    assert [r.status for r in runs] == ["passed"] * 4
    assert shared.taken == 4 and shared.most == 1
