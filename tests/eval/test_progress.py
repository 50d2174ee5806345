"""Progress lines: a self-rewriting line on a terminal, a log line every tenth otherwise."""

import io
import logging

from ferrylm.eval.progress import Progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_rewritten_line():
    out = _Tty()
    p = Progress("[base] HumanEval generation", 4, stream=out)
    for _ in range(4):
        p.tick()
    text = out.getvalue()
    assert text.count("\r") == 4 and text.endswith("\n")
    assert "[base] HumanEval generation: 4/4 (100%)" in text and "s elapsed, 0 s left" in text


def test_a_log_gets_a_line_every_tenth(caplog):
    with caplog.at_level(logging.INFO, logger="ferrylm.eval"):
        p = Progress("HumanEval execution", 164, stream=io.StringIO())
        run = p.wrap(lambda x: x * 2)
        assert [run(i) for i in range(164)][-1] == 326
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("HumanEval execution")]
    assert len(lines) == 10 and lines[0].startswith("HumanEval execution: 17/164 (10%)")
    assert lines[-1].startswith("HumanEval execution: 164/164 (100%)")


def test_an_interrupt_drops_the_items_not_yet_started():
    import threading
    import time

    import pytest

    from ferrylm.eval.progress import pool_map

    started = []

    def one(i):
        started.append(i)
        if i == 1:
            raise KeyboardInterrupt  # as Ctrl-C would surface in the waiting thread
        time.sleep(0.05)
        return i

    threads_before, t0 = threading.active_count(), time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pool_map(one, range(200), 2)
    time.sleep(0.3)
    assert len(started) < 10 and time.monotonic() - t0 < 5  # not 200 items x 50 ms
    assert threading.active_count() <= threads_before  # the pool's two workers have ended
    assert pool_map(lambda i: i * i, range(5), 2) == [0, 1, 4, 9, 16]
