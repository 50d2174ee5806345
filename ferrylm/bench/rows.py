"""The rows every training trial reads: the data stage's own, or seeded random tokens of a set length.

Either way a trial finds them as the train stage always does, through a data record in its run
directory; that record here points at the source's files instead of copying them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..config import Config
from ..manifest import StageRecord, read_record
from ..models import resolve_model_path


def source(cfg: Config, out: Path, rows_needed: int) -> dict:
    """{"kind", "train", "eval", "seq_len"}: where the trials' rows are."""
    b = cfg.bench
    has_data = (cfg.stage_dir("data") / "record.json").is_file()
    if b.rows == "data" or (b.rows == "auto" and has_data):
        data = read_record(cfg.stage_dir("data"))["outputs"]  # one clear line when it is missing
        return {"kind": "data", "train": data["train"], "eval": data["eval"], "seq_len": cfg.data.max_seq_len}
    return synthetic(cfg, out / "rows", rows_needed, b.seq_len or cfg.data.max_seq_len)


def synthetic(cfg: Config, out: Path, rows: int, seq_len: int) -> dict:
    """`rows` training rows and a few held-out ones of `seq_len` uniform random token ids (seed
    bench: train.seed), labels equal to the inputs."""
    from ..data.encode import ArrowRows

    config = json.loads((resolve_model_path(cfg.model.path, cfg.model.cache_dir) / "config.json").read_text())
    vocab = int(config["vocab_size"])
    rng = np.random.default_rng(cfg.train.seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, count in (("train", rows), ("eval", cfg.train.per_device_batch_size)):
        writer = ArrowRows(out / f"{name}.arrow", ["input_ids", "labels"])
        for _ in range(count):
            ids = rng.integers(0, vocab, seq_len).tolist()
            writer.write({"input_ids": ids, "labels": ids})
        paths[name] = str(writer.close())
    return {"kind": "synthetic", **paths, "seq_len": seq_len}


def hand_over(rows: dict, trial_dir: Path) -> None:
    """The data record a trial's train stage reads."""
    record = StageRecord("data", "bench")
    record.outputs = {"train": rows["train"], "eval": rows["eval"]}
    record.metrics = {"rows": rows["kind"], "seq_len": rows["seq_len"]}
    (trial_dir / "data").mkdir(parents=True, exist_ok=True)
    record.finish(trial_dir / "data")
