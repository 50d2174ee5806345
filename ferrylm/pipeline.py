"""`ferrylm run`: every stage in order, each reading what the previous one wrote."""

from __future__ import annotations

from .config import Config
from .data import run_data
from .eval import run_eval
from .export import run_export
from .manifest import StageRecord
from .train import run_train


def run_all(cfg: Config) -> list[StageRecord]:
    # serve is not a separate step here: eval brings endpoints up and down itself.
    return [stage(cfg) for stage in (run_data, run_train, run_export, run_eval)]
