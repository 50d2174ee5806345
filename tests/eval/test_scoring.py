"""Where the eval executes the replies (eval/scoring.py): at once, or in one thread beside what follows."""

import threading

import pytest

from ferrylm.eval.scoring import Scoring


def test_scoring_at_once_runs_the_execution_in_the_caller():
    with Scoring(beside=False) as scoring:
        got = scoring.later(lambda: threading.current_thread().name)
        assert got == threading.current_thread().name and not scoring.jobs
        assert scoring.results({"m": ({"benchmarks": [1]}, [])})["m"][0]["benchmarks"] == [1]


def test_scoring_beside_runs_it_in_one_thread_and_the_measures_stand_until_results():
    order, gate = [], threading.Event()

    def run(name):
        gate.wait(5)  # held until the caller has moved on: the execution runs beside it
        order.append((name, threading.current_thread().name))
        return [name]

    with Scoring(beside=True) as scoring:
        measured = {n: ({"benchmarks": scoring.later(lambda n=n: run(n))}, []) for n in ("a", "b")}
        order.append(("caller", threading.current_thread().name))
        gate.set()
        done = scoring.results(measured)
    assert [o[0] for o in order] == ["caller", "a", "b"]  # one thread, in the order handed over
    assert all(thread.startswith("scoring") for _, thread in order[1:])
    assert {n: m["benchmarks"] for n, (m, _) in done.items()} == {"a": ["a"], "b": ["b"]}


def test_scoring_beside_raises_an_execution_error_when_settled():
    def broken():
        raise RuntimeError("sandbox gone")

    with Scoring(beside=True) as scoring:
        scoring.later(broken)
        with pytest.raises(RuntimeError, match="sandbox gone"):
            scoring.settle()
