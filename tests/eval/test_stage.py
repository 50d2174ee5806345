"""The eval stage's helpers that need no model."""

import threading

from ferrylm.eval.execution.queue import ExecutionQueue


def test_no_latency_runs_measure_nothing_and_wait_for_nothing():
    from types import SimpleNamespace

    from ferrylm.config.loader import load_config
    from ferrylm.eval.stage import _latency

    cfg = load_config("default", ["eval.latency_runs=0"])
    engine_backed = SimpleNamespace(engine=object())  # an in-process generator: latency would run on its engine
    with ExecutionQueue(beside=True) as queue:
        gate = threading.Event()
        queue.later(lambda _: gate.wait(5))
        assert _latency(cfg, engine_backed, "fine-tuned", queue) is None
        assert not queue.jobs[0].done()  # the execution beside was not waited for
        gate.set()
