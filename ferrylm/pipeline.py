"""`ferrylm run`: every stage in order, each reading what the previous one wrote."""

from __future__ import annotations

import time

from .config import Config
from .data import run_data
from .eval import run_eval
from .export import run_export
from .log import get_logger
from .manifest import StageRecord
from .train import run_train

log = get_logger("run")


def run_all(cfg: Config) -> list[StageRecord]:
    """Each stage with its start, its time and the whole run's at the end (a person waiting sees where it is)."""
    # serve is not a separate step here: eval brings endpoints up and down itself.
    stages, records, t0 = (run_data, run_train, run_export, run_eval), [], time.monotonic()
    for i, stage in enumerate(stages, 1):
        name = stage.__name__.removeprefix("run_")
        log.info("stage %d of %d: %s", i, len(stages), name)
        started = time.monotonic()
        records.append(stage(cfg))
        log.info("stage %d of %d: %s done in %s", i, len(stages), name, minutes(time.monotonic() - started))
    log.info("all %d stages done in %s", len(stages), minutes(time.monotonic() - t0))
    return records


def minutes(seconds: float) -> str:
    """`12 min 05 s`, or `42 s` under a minute."""
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"
