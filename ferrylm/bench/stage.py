"""`run_bench(cfg)`: the bench stage's entry function and its helpers (what the stage does: the
package's docstring)."""

from __future__ import annotations

import platform
import sys

from ..config import Config
from ..manifest import StageRecord, locked_stage, read_record


def _machine(gpus_wanted: int | None) -> dict:
    import torch

    cuda = torch.cuda.is_available()
    visible = torch.cuda.device_count() if cuda else 0
    return {
        "device": torch.cuda.get_device_name() if cuda else f"CPU ({platform.processor() or platform.machine()})",
        "cuda": cuda,
        "gpus": visible,
        "processes": min(gpus_wanted or visible, visible) if cuda else 1,
        "torch": torch.__version__,
    }


def _progress(i: int, n: int, name: str, row: dict | None = None) -> None:
    if row is None:
        print(f"bench [{i}/{n}] {name} …", file=sys.stderr, flush=True)
        return
    if row["status"] != "ok":
        print(f"bench [{i}/{n}] {name}: failed — {row.get('reason')}", file=sys.stderr, flush=True)
        return
    speed = f"{row['tokens_per_s']:,.0f} tok/s" if "tokens_per_s" in row else f"{row['ms_per_token']:.1f} ms/token"
    memory = row.get("peak_allocated_gib") or row.get("host_rss_gib")
    print(
        f"bench [{i}/{n}] {name}: {speed}, peak {memory:.2f} GiB ({row['wall_s']:.0f} s)", file=sys.stderr, flush=True
    )


def _decode_targets(cfg: Config, has_cuda: bool):
    from ..models import load_tokenizer
    from .decode import PROMPT, targets

    if not cfg.bench.decode:
        return [], {}, None
    if not (cfg.stage_dir("export") / "record.json").is_file():
        return [], {"every artifact": "no export record in this run: run `ferrylm export` first"}, None
    export = read_record(cfg.stage_dir("export"))
    run, skipped = targets(export, has_cuda)
    prompt = load_tokenizer(export["outputs"]["merged"])(PROMPT, add_special_tokens=False)["input_ids"]
    return run, skipped, prompt


@locked_stage("bench")
def run_bench(cfg: Config) -> StageRecord:
    """Training trials, then decoding trials, each row written to bench.json as it lands; the report."""
    from . import report, rows, strategies, trials

    b, t = cfg.bench, cfg.train
    out = cfg.stage_dir("bench")
    out.mkdir(parents=True, exist_ok=True)
    machine = _machine(b.gpus)
    chosen, skipped = strategies.plan(b.strategies, machine["cuda"], machine["processes"])
    decoders, decode_skipped, prompt = _decode_targets(cfg, machine["cuda"])
    needed = (b.warmup_steps + b.steps) * t.per_device_batch_size * t.gradient_accumulation_steps * machine["processes"]
    results = {
        "machine": machine,
        "model": cfg.model.path,
        "warmup_steps": b.warmup_steps,
        "steps": b.steps,
        "micro_batch": t.per_device_batch_size,
        "accumulation": t.gradient_accumulation_steps,
        "rows": rows.source(cfg, out, needed) if chosen else None,
        "training": [],
        "skipped": skipped,
        "decoding": [],
        "decode_skipped": decode_skipped,
    }
    n = len(chosen) + len(decoders)
    for i, s in enumerate(chosen, 1):
        _progress(i, n, s.name)
        results["training"].append(
            trials.train_trial(cfg, s, out / "trials" / s.name, results["rows"], machine["processes"])
        )
        _progress(i, n, s.name, results["training"][-1])
        report.write(out, results)
    for i, d in enumerate(decoders, len(chosen) + 1):
        _progress(i, n, d.name)
        results["decoding"].append(
            trials.decode_trial(
                d, prompt, b.decode_tokens, out / "decode" / d.name.replace("/", "-"), b.trial_timeout_s
            )
        )
        _progress(i, n, d.name, results["decoding"][-1])
        report.write(out, results)
    record = StageRecord("bench", cfg.digest())
    record.outputs = report.write(out, results)
    record.metrics = {
        "training": {r["strategy"]: r.get("tokens_per_s") for r in results["training"]},
        "decoding_ms_per_token": {r["artifact"]: r.get("ms_per_token") for r in results["decoding"]},
        "failed": [
            r.get("strategy", r.get("artifact"))
            for r in results["training"] + results["decoding"]
            if r["status"] != "ok"
        ],
    }
    return record.finish(out)
