"""Generated code runs for real, contained: canonical HumanEval solutions pass, hostile programs do not."""
import json
import os
import socket
import time
from pathlib import Path

import pytest

from ferrylm.cli import main
from ferrylm.eval.humaneval import SamplesError, completion_from_reply, execute, load_problems, score_samples
from ferrylm.eval.sandbox import Sandbox, run_program

ROOT = os.geteuid() == 0


def test_all_canonical_solutions_pass_and_wrong_ones_fail():
    problems = load_problems()
    assert len(problems) == 164
    canonical = execute(problems, [(p["task_id"], p["canonical_solution"]) for p in problems], 10, 1024, 2)
    assert sum(r["passed"] for r in canonical) == 164
    wrong = execute(problems[:20], [(p["task_id"], "    return None\n") for p in problems[:20]], 10, 1024, 2)
    assert sum(r["passed"] for r in wrong) == 0


def test_basic_outcomes():
    assert run_program("import sys; sys.exit(0)") == "passed"
    assert run_program("assert 1 == 2").startswith("failed: AssertionError")
    t = time.monotonic()
    assert run_program("while True: pass", timeout_s=1) == "timed out"
    assert time.monotonic() - t < 5
    assert run_program("x = bytearray(4 << 30)", memory_mb=256).startswith("failed: MemoryError")
    assert run_program("import os; assert 'PYTHONPATH' not in os.environ and os.environ['HOME'] == os.getcwd()") == "passed"


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
    assert out.status.startswith("failed:") and out.isolation.startswith("namespaces")


@pytest.fixture
def private_dir():
    """An evaluator-owned 0700 directory where the sandbox can see it: not under /tmp, /var/tmp,
    /dev/shm (the sandbox's own tmpfs) nor under a closed home directory (hidden from it)."""
    import shutil

    if not ROOT:
        pytest.skip("uid separation (and this directory) need root")
    d = Path("/var/lib") / f"ferrylm-test-private-{os.getpid()}"
    d.mkdir(mode=0o700)
    yield d
    shutil.rmtree(d)


def test_writes_outside_its_directory_do_not_land(box, private_dir):
    marker = f"/tmp/ferrylm-escape-{os.getpid()}"
    assert box.run(f"open({marker!r}, 'w').write('x')").status == "passed"  # its own tmpfs ...
    assert not os.path.exists(marker)                                       # ... gone with it
    outside = Path("/var/lib") / f"ferrylm-escape-{os.getpid()}.txt"
    out = box.run(f"open({str(outside)!r}, 'w').write('x')\n")
    assert out.status.startswith("failed: PermissionError") and not outside.exists()
    assert box.run(f"open({str(private_dir / 'x')!r}, 'w')").status.startswith("failed: PermissionError")


def test_cannot_read_the_evaluators_files(box, private_dir):
    secret = private_dir / "answers.jsonl"
    secret.write_text("the hidden tests")
    assert box.run(f"print(open({str(secret)!r}).read())").status.startswith("failed: PermissionError")


def test_cannot_kill_its_parent(box):
    out = box.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    assert out.status.startswith("failed: PermissionError")


def test_fork_bomb_and_orphans_are_contained(box):
    t = time.monotonic()
    out = box.run("import os\nwhile True:\n    os.fork()\n")
    assert out.status != "passed" and time.monotonic() - t < 10
    # A child that outlives the timeout goes with its group.
    assert box.run("import os, time\nif os.fork() == 0:\n    time.sleep(60)\ntime.sleep(60)\n").status == "timed out"
    deadline = time.monotonic() + 10  # SIGKILLed processes take a moment to be reaped
    while (leftovers := [p for p in os.listdir("/proc") if p.isdigit() and _uid(p) in (61000, 61001)]) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers == []


def _uid(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith("Uid:"))
    except (OSError, StopIteration):
        return -1


def test_isolation_level_is_recorded(box):
    expected = "namespaces+uid" if ROOT else ("namespaces", "limits")
    assert box.run("pass").isolation in (expected if isinstance(expected, tuple) else (expected,))


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
    f.write_text("".join(json.dumps(l) + "\n" for l in lines))
    res = score_samples(f)
    assert (res["tasks"], res["samples"], res["passed_samples"]) == (2, 8, 4)
    assert res["pass@1"] == pytest.approx((0.75 + 0.25) / 2)
    assert "pass@10" not in res  # k > n is not estimated
    assert main(["eval", "humaneval", "--samples", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["pass@1"] == pytest.approx(0.5)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "HumanEval/0"}\n')
    with pytest.raises(SamplesError, match="bad.jsonl:1: expected a JSON object"):
        score_samples(bad)
    assert main(["eval", "humaneval", "--samples", str(tmp_path / "none.jsonl")]) == 2


def test_programs_do_not_see_what_earlier_ones_left():
    with Sandbox(1, timeout_s=3) as one:
        assert one.run("open('/tmp/left-behind', 'w').write('x')").status == "passed"
        assert one.run("import os\nassert not os.path.exists('/tmp/left-behind')").status == "passed"
        # A program that takes its worker down costs only itself: the slot gets a new worker.
        one.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
        assert one.run("pass").status == "passed"
