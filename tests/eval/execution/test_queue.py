"""Where the eval executes the replies (eval/execution/queue.py): at once, or beside what follows, several models'
replies at once within one budget of running programs."""

import threading
import time

import pytest

from ferrylm.eval.execution.queue import ExecutionQueue
from ferrylm.eval.progress import pool_map
from ferrylm.eval.tasks.benchmark import gated


def test_scoring_at_once_runs_the_execution_in_the_caller():
    with ExecutionQueue(beside=False) as queue:
        got = queue.later(lambda gate: (threading.current_thread().name, gate))
        assert got == (threading.current_thread().name, None) and not queue.jobs
        assert queue.results({"m": ({"benchmarks": [1]}, [])})["m"][0]["benchmarks"] == [1]


def test_scoring_beside_runs_it_in_other_threads_and_the_measures_stand_until_results():
    order, gate = [], threading.Event()

    def run(name):
        gate.wait(5)  # held until the caller has moved on: the execution runs beside it
        order.append((name, threading.current_thread().name))
        return [name]

    with ExecutionQueue(beside=True) as queue:
        measured = {n: ({"benchmarks": queue.later(lambda _, n=n: run(n))}, []) for n in ("a", "b")}
        order.append(("caller", threading.current_thread().name))
        gate.set()
        done = queue.results(measured)
    assert order[0][0] == "caller" and {o[0] for o in order[1:]} == {"a", "b"}
    assert all(thread.startswith("execution") for _, thread in order[1:])
    assert {n: m["benchmarks"] for n, (m, _) in done.items()} == {"a": ["a"], "b": ["b"]}


def test_scoring_beside_raises_an_execution_error_when_settled():
    def broken(_):
        raise RuntimeError("sandbox gone")

    with ExecutionQueue(beside=True) as queue:
        queue.later(broken)
        with pytest.raises(RuntimeError, match="sandbox gone"):
            queue.settle()


def test_scoring_beside_overlaps_models_yet_never_runs_more_programs_than_its_slots():
    """A model's slow test holds one slot; the next model's tests run in the others meanwhile."""
    running, most, lock, release = 0, 0, threading.Lock(), threading.Event()

    def program(name):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(10) if name == "slow" else time.sleep(0.02)
        with lock:
            running -= 1
        return name

    def model(programs):  # what benchmark.run_programs does with a sandbox of 2 workers
        return lambda gate: pool_map(gated(program, gate), programs, 2)

    with ExecutionQueue(beside=True, slots=2) as queue:
        first = queue.later(model(["slow", "a"]))
        second = queue.later(model(["b1", "b2", "b3", "b4", "b5"]))
        assert second.result(timeout=10) == ["b1", "b2", "b3", "b4", "b5"]
        assert not first.done()  # its slow test still runs: the second model did not wait for it
        release.set()
        assert first.result(timeout=10) == ["slow", "a"]
    assert most == 2
