"""The data stage's pool workers die on the pool's SIGTERM whatever handler the forking process holds.

A process that ran the serve stage held its stop handler (it sets SIGTERM to ignored and raises); a
worker forked from it ran that handler inside its blocked result write, where the pool catches the
exception and writes again — now deaf to SIGTERM — so `pool.terminate()` waited for ever (the data
stage hung in a test run). Where the worker is when the signal comes is a race, so this checks the
disposition the workers hold, which is what decides it.
"""

import importlib
import multiprocessing as mp
import signal

from ferrylm.config import DataConfig

collect = importlib.import_module("ferrylm.data.collect")


def _stop(signum, frame):
    raise RuntimeError("stop")


def _dispositions() -> tuple:
    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)


def _keeps_the_handler(results) -> None:
    collect._init(DataConfig(), False)
    results.put(signal.getsignal(signal.SIGTERM) is _stop)


def test_workers_drop_the_parents_signal_handlers():
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        ctx = mp.get_context("fork")
        with ctx.Pool(1, initializer=collect._init_worker, initargs=(DataConfig(), False)) as pool:
            assert pool.apply(_dispositions) == (signal.SIG_DFL, signal.SIG_IGN)
        # The control: a worker that keeps what it inherited holds the parent's handler. It reports and exits on
        # its own: a pool's SIGTERM could meet that handler in its blocked read and hang the test (the very race).
        results = ctx.SimpleQueue()
        worker = ctx.Process(target=_keeps_the_handler, args=(results,))
        worker.start()
        assert results.get() is True
        worker.join(60)
    finally:
        signal.signal(signal.SIGTERM, previous)
