"""Data stage: corpus → docstring→body pairs → chat-rendered, loss-masked train/eval JSONL."""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from ..config import Config
from ..log import get_logger
from ..manifest import StageRecord, sha256_file
from ..models import load_tokenizer, resolve_model_path
from .corpus import ScanStats, scan
from .pairs import extract_pairs
from .render import render_example

log = get_logger("data")


class EmptyCorpus(ValueError):
    pass


def read_jsonl(path: str | Path, limit: int | None = None) -> list[dict]:
    """The rows of a JSONL file written by this stage (train/eval examples), the first `limit` of them."""
    rows = []
    with open(path) as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
            if limit and len(rows) == limit:
                break
    return rows


def _is_eval(rel_path: str, fraction: float, seed: int) -> bool:
    # Split by file, deterministically: every function of a file lands on the same side.
    h = int(hashlib.sha256(f"{seed}:{rel_path}".encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < fraction


def run_data(cfg: Config) -> StageRecord:
    d = cfg.data
    out = cfg.stage_dir("data")
    record = StageRecord("data", cfg.digest())
    model_dir = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    tokenizer = load_tokenizer(model_dir)

    stats = ScanStats()
    pairs = []
    for f in scan(d, stats):
        if f.path.suffix == ".py":
            pairs.extend(extract_pairs(f.text, f.rel, d.min_body_lines, d.max_body_lines))
    if stats.kept == 0:
        raise EmptyCorpus(f"data.sources: no code files passed the filters in {d.sources} "
                          f"(seen {stats.seen}, dropped {dict(stats.dropped)})")
    if not pairs:
        raise EmptyCorpus(f"data.sources: {stats.kept} code files but no Python function with a docstring "
                          f"and a {d.min_body_lines}–{d.max_body_lines} line body")

    random.Random(d.seed).shuffle(pairs)
    if d.max_pairs:
        pairs = pairs[: d.max_pairs]
    splits = {"train": [], "eval": []}
    too_long = 0
    for p in pairs:
        ex = render_example(tokenizer, p.prompt_code, p.body)
        if len(ex["input_ids"]) > d.max_seq_len:
            too_long += 1
            continue
        split = "eval" if _is_eval(p.source.split("::")[0], d.eval_fraction, d.seed) else "train"
        splits[split].append({"source": p.source, "prompt_code": p.prompt_code, "body": p.body, **ex})
    if not splits["train"] or not splits["eval"]:
        raise EmptyCorpus(f"data: the split left train={len(splits['train'])} eval={len(splits['eval'])} "
                          f"examples; add sources or change data.eval_fraction")

    out.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        tmp = out / f".{name}.jsonl.tmp"
        with open(tmp, "w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
        tmp.replace(out / f"{name}.jsonl")
        record.outputs[name] = str(out / f"{name}.jsonl")
    record.inputs = {f"source:{s}": "tree" for s in d.sources}
    record.inputs["tokenizer"] = sha256_file(Path(model_dir) / "tokenizer.json") if (Path(model_dir) / "tokenizer.json").is_file() else str(model_dir)
    record.metrics = {
        "files_seen": stats.seen,
        "files_kept": stats.kept,
        "files_dropped": dict(stats.dropped),
        "files_by_extension": dict(stats.by_extension),
        "pairs_extracted": len(pairs),
        "pairs_too_long": too_long,
        "train_examples": len(splits["train"]),
        "eval_examples": len(splits["eval"]),
        "train_tokens": sum(len(r["input_ids"]) for r in splits["train"]),
        "train_answer_tokens": sum(sum(1 for x in r["labels"] if x != -100) for r in splits["train"]),
    }
    log.info("data: %d files kept of %d, %d train / %d eval examples", stats.kept, stats.seen,
             len(splits["train"]), len(splits["eval"]))
    return record.finish(out)
