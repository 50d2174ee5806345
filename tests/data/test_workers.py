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


def test_workers_drop_the_parents_signal_handlers():
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        ctx = mp.get_context("fork")
        with ctx.Pool(1, initializer=collect._init_worker, initargs=(DataConfig(), False)) as pool:
            assert pool.apply(_dispositions) == (signal.SIG_DFL, signal.SIG_IGN)
        # The control: a worker that keeps what it inherited runs the parent's handler.
        with ctx.Pool(1, initializer=collect._init, initargs=(DataConfig(), False)) as pool:
            assert pool.apply(_dispositions)[0] is _stop
    finally:
        signal.signal(signal.SIGTERM, previous)
