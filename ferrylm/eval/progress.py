"""Progress of a long evaluation step: done / total, elapsed and remaining time. On a terminal one
line rewrites itself; otherwise (a log file, CI) a log line every tenth of the way."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ..log import get_logger

log = get_logger("eval")


class Progress:
    def __init__(self, what: str, total: int, stream=None, every: float = 0.1):
        self.what, self.total = what, max(total, 1)
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every, self.done, self.t0 = every, 0, time.monotonic()
        self._next = every
        self._lock = threading.Lock()
        self.note = ""  # what the count alone does not say ("12 tasks kept"), after the line

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        left = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        rate = self.done / elapsed if elapsed > 0 else 0.0
        return (
            f"{self.what}: {self.done}/{self.total} ({self.done / self.total:.0%}), {rate:.2f}/s, "
            f"{elapsed:.0f} s elapsed, {'?' if left != left else f'{left:.0f}'} s left"
            + (f"; {self.note}" if self.note else "")
        )

    def tick(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self.tty:
                self.stream.write("\r" + self.line() + ("\n" if self.done >= self.total else ""))
                self.stream.flush()
            elif self.done / self.total >= self._next or self.done >= self.total:
                log.info("%s", self.line())
                while self._next <= self.done / self.total:
                    self._next += self.every

    def wrap(self, fn):
        """fn, ticking once per call (for pool.map)."""

        def run(*args):
            try:
                return fn(*args)
            finally:
                self.tick()

        return run


def pool_map(fn, items, workers: int) -> list:
    """[fn(item) ...] on `workers` threads, in order. On Ctrl-C (or any error) the items not yet
    started are dropped instead of run: a plain `with ThreadPoolExecutor` would wait for all of them."""
    pool = ThreadPoolExecutor(workers)
    try:
        out = list(pool.map(fn, items))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return out
