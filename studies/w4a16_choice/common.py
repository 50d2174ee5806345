"""What this study's scripts share (they run from this folder)."""

from __future__ import annotations

from ferrylm.config.loader import load_config
from ferrylm.eval.tasks import benchmark
from ferrylm.manifest import read_record


def run_tracks(preset: str, run: str, overrides: list[str]):
    """The run's config, data record and the eval's tracks as the eval stage builds them (tasks found or cached)."""
    cfg = load_config(preset, [f"run_dir={run}", *overrides])
    data = read_record(cfg.stage_dir("data"))
    tracks, _ = benchmark.with_tasks(benchmark.tracks(cfg.eval, data["outputs"]))
    return cfg, data, benchmark.asked_for(tracks, data["metrics"].get("answer_form", "body"))


def keeps(row: dict) -> bool:
    """The issue's bar for shipping: within 2 points of the merged model and not significantly worse (p >= 0.05)."""
    drop = 100 * (row["merged"] - row["artifact"]) / max(row["tasks"], 1)
    return drop <= 2 and (row["p"] is None or row["p"] >= 0.05 or row["artifact"] >= row["merged"])
