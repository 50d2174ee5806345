"""How much of the machine each test keeps busy: a pytest plugin.

    .venv/bin/python -m pytest -p bench.suite_cores -q      # from the repository root

For every test: its wall time and the cores the whole machine kept busy meanwhile (from /proc/stat,
so the servers and compilers a test starts count too). At the end: the suite's core-seconds, its mean
busy cores, and the floor that perfect packing onto every core would give (core-seconds / cores).
Rows go to $SUITE_CORES_OUT (default suite_cores.tsv), slowest first. Linux only.
"""

from __future__ import annotations

import os
import time

import pytest

_rows: list[tuple[float, float, str]] = []


def _busy_and_total() -> tuple[int, int]:
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # idle and iowait are not busy


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    busy0, total0 = _busy_and_total()
    start = time.monotonic()
    yield
    busy1, total1 = _busy_and_total()
    cores = os.cpu_count() * (busy1 - busy0) / max(1, total1 - total0)
    _rows.append((time.monotonic() - start, cores, item.nodeid))


def pytest_terminal_summary(terminalreporter):
    if not _rows:
        return
    wall = sum(w for w, _, _ in _rows)
    core_s = sum(w * c for w, c, _ in _rows)
    out = os.environ.get("SUITE_CORES_OUT", "suite_cores.tsv")
    with open(out, "w") as fh:
        fh.write("wall_s\tbusy_cores\ttest\n")
        for w, c, name in sorted(_rows, reverse=True):
            fh.write(f"{w:.1f}\t{c:.2f}\t{name}\n")
    terminalreporter.write_line(
        f"suite_cores: {len(_rows)} tests, {wall:.0f} s of tests, {core_s:.0f} core-seconds, "
        f"{core_s / wall:.2f} of {os.cpu_count()} cores busy on average; perfectly packed: {core_s / os.cpu_count():.0f} s "
        f"(rows: {out})"
    )
