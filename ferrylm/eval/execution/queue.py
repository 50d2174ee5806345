"""Where the eval executes the models' replies: at once, or beside the next model's generation."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor


class ExecutionQueue:
    """Where the replies are executed: at once (the default), or, when the models generate on a GPU, beside
    the next model's generation (the CPU is otherwise idle while a GPU generates) — several models' replies
    at once, never more than `slots` programs running together, so a slow test of one model's leaves the
    free slots to the next model's tests instead of idling them."""

    LANES = 4  # models whose executions may overlap

    @classmethod
    def for_this_machine(cls, slots: int) -> ExecutionQueue:
        return cls(beside=on_gpu(), slots=slots)

    def __init__(self, beside: bool, slots: int = 1):
        self.pool = ThreadPoolExecutor(self.LANES, thread_name_prefix="execution") if beside else None
        self.gate = threading.BoundedSemaphore(slots) if beside else None
        self.jobs: list[Future] = []

    def later(self, fn):
        """fn(gate): at once (gate None), or in a lane with the shared gate each of its programs holds while
        it runs; returns fn's result, or the future standing for it."""
        if self.pool is None:
            return fn(None)
        self.jobs.append(self.pool.submit(fn, self.gate))
        return self.jobs[-1]

    def settle(self) -> None:
        """Every execution handed over so far finished (its error raised)."""
        for job in self.jobs:
            job.result()

    def __enter__(self) -> ExecutionQueue:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:  # a failed generation leaves nothing queued behind it
            self.pool.shutdown(cancel_futures=True)

    def results(self, measured: dict) -> dict:
        """`measured` (label → (measures, rows)) with each future replaced by what it found."""
        self.settle()
        for measures, _ in measured.values():
            if isinstance(measures["benchmarks"], Future):
                measures["benchmarks"] = measures["benchmarks"].result()
        return measured


def on_gpu() -> bool:
    """Whether the models generate on a GPU here (in-process or served), leaving the CPU to execution."""
    import torch

    return torch.cuda.is_available()
