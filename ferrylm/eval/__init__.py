"""Eval stage: HumanEval Pass@1, BLEU and latency against live endpoints, training numbers, the report.

With `eval.endpoint` set, the running endpoint is measured as the fine-tuned model. Otherwise the
stage starts vLLM itself on the exported model and (with `eval.compare_base`) on the base model,
one after the other, so both are measured the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..config import Config
from ..log import get_logger
from ..manifest import StageRecord, read_record
from ..models import resolve_model_path
from . import humaneval
from .quality import bleu, held_out_pairs, latency
from .report import write_report

log = get_logger("eval")


def measure_endpoint(cfg: Config, url: str, model: str, problems: list[dict], pairs: list[dict], out: Path,
                     label: str) -> dict:
    e = cfg.eval
    log.info("[%s] HumanEval: generating %d completions", label, len(problems))
    completions = humaneval.generate(url, model, problems, e.max_new_tokens, e.concurrency)
    results = humaneval.execute(problems, completions, e.exec_timeout_s, e.exec_memory_mb, e.exec_workers)
    with open(out / f"humaneval_{label}.jsonl", "w") as fh:
        for r in results:
            fh.write(json.dumps({**r, "completion": completions[r["task_id"]]}) + "\n")
    log.info("[%s] BLEU on %d held-out pairs", label, len(pairs))
    b = bleu(url, model, pairs, e.max_new_tokens, e.concurrency)
    log.info("[%s] latency of %d new tokens", label, e.latency_new_tokens)
    lat = latency(url, model, e.latency_new_tokens)
    return {"humaneval_tasks": len(results), "humaneval_passed": sum(r["passed"] for r in results),
            "pass_at_1": humaneval.pass_at_1(results), "bleu": b, "latency": lat}


def _criteria_values(measured: dict | None, train: dict | None, which: str) -> dict:
    """Pick each criterion's number for one model ('fine-tuned' or 'base')."""
    v: dict = {}
    if train:
        prefix = "" if which == "fine-tuned" else "base_"
        v["loss"] = train.get(f"{prefix}eval_loss")
        v["perplexity"] = train.get(f"{prefix}perplexity")
        v["grad_norm"] = train.get("final_grad_norm") if which == "fine-tuned" else None
    if measured:
        v["bleu"] = measured["bleu"]["bleu_0_1"]
        v["pass_at_1"] = measured["pass_at_1"]
        v["latency_512_s"] = measured["latency"]["total_s"]
    return v


def run_eval(cfg: Config) -> StageRecord:
    from ..serve import server_for, served_model_dir

    e = cfg.eval
    out = cfg.stage_dir("eval")
    out.mkdir(parents=True, exist_ok=True)
    record = StageRecord("eval", cfg.digest())
    problems = humaneval.load_problems(e.humaneval_limit)
    pairs = held_out_pairs(cfg.stage_dir("data") / "eval.jsonl", e.bleu_limit)
    try:
        train = read_record(cfg.stage_dir("train"))["metrics"]
    except FileNotFoundError:
        train = None

    measured: dict[str, dict] = {}
    if e.endpoint:
        measured["fine-tuned"] = measure_endpoint(cfg, e.endpoint.rstrip("/"), cfg.serve.served_name,
                                                  problems, pairs, out, "fine-tuned")
    else:
        targets = {"fine-tuned": served_model_dir(cfg)}
        if e.compare_base:
            targets["base"] = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
        for label, model_dir in targets.items():
            with server_for(cfg, model_dir) as server:
                measured[label] = measure_endpoint(cfg, server.url, server.served_name, problems, pairs, out, label)

    labels = ["fine-tuned", "base"] if (e.compare_base and not e.endpoint) or train else ["fine-tuned"]
    models = {m: _criteria_values(measured.get(m), train, m) for m in labels}
    details = {m: measured[m] for m in measured}
    if train:
        details["training"] = {k: train[k] for k in ("steps", "first_train_loss", "final_train_loss",
                                                     "final_grad_norm", "tokens_seen", "train_runtime_s") if k in train}
    write_report(out, cfg.criteria, models, details)
    record.outputs = {"report_md": str(out / "report.md"), "report_json": str(out / "report.json")}
    record.metrics = {"models": models}
    log.info("report: %s", out / "report.md")
    return record.finish(out)
