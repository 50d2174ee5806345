"""Eval stage: code benchmarks' Pass@k (HumanEval, HumanEval-X; see benchmark.py), BLEU and latency against live endpoints, training numbers, the report.

With `eval.endpoint` set, the running endpoint is measured as the fine-tuned model; with
`eval.local=true` the models run in-process with transformers (no latency then). Otherwise the
stage starts vLLM itself on the exported model and (with `eval.compare_base`) on the base model,
one after the other, so both are measured the same way.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from ..errors import FerryError
from ..config import Config
from ..log import get_logger
from ..manifest import StageRecord, locked_stage, read_record, stage_lock, write_json_atomic
from ..models import resolve_model_path
from . import benchmark
from .criteria import Criterion, load_criteria, per_track
from .generators import EndpointGenerator, LocalGenerator
from ..data import read_jsonl
from .quality import bleu, engine_latency, latency
from .report import write_report

log = get_logger("eval")


class GateFailed(FerryError, RuntimeError):
    """A gating criterion failed; the report is written, the exit code says so."""

    exit_code = 3


def measure(cfg: Config, generator, tracks: list[benchmark.Track], pairs: list[dict], out: Path, label: str) -> dict:
    """The benchmarks' tracks and BLEU through `generator`; latency too when it is an endpoint (it
    needs streaming) or an in-process engine."""
    e = cfg.eval
    log.info("[%s] %s (%s prompts) × %d samples", label, ", ".join(f"{t.title}: {len(t.problems)} tasks" for t in tracks),
             e.prompt_mode, e.samples_per_task)
    measured = {"benchmarks": benchmark.measure(generator, tracks, e, out, label)}
    log.info("[%s] BLEU on %d held-out pairs", label, len(pairs))
    measured["bleu"], outputs = bleu(generator, pairs, e.max_new_tokens, e.concurrency)
    with open(out / f"heldout_{label}.jsonl", "w") as fh:      # what BLEU scored, for people to judge (review)
        for pair, output in zip(pairs, outputs):
            fh.write(json.dumps({"source": pair.get("source"), "language": pair.get("language"),
                                 "messages": pair["messages"], "reference": pair["reference"], "output": output}) + "\n")
    measured["latency"] = None
    if isinstance(generator, EndpointGenerator):
        log.info("[%s] latency of %d new tokens, %d runs, concurrency %s", label, e.latency_new_tokens,
                 e.latency_runs, e.latency_concurrency)
        measured["latency"] = latency(generator.base_url, generator.model, e.latency_new_tokens, e.latency_runs,
                                      e.latency_concurrency)
    elif getattr(generator, "engine", None) is not None:
        log.info("[%s] latency of %d new tokens in-process, %d runs", label, e.latency_new_tokens, e.latency_runs)
        measured["latency"] = engine_latency(generator, e.latency_new_tokens, e.latency_runs)
    return measured


def criteria_values(measured: dict | None, train: dict | None, which: str) -> dict:
    """Each criterion's number for one model ('fine-tuned' or 'base'); None where not measured."""
    v: dict = {}
    if train:
        prefix = "" if which == "fine-tuned" else "base_"
        v["loss"] = train.get(f"{prefix}eval_loss")
        v["perplexity"] = train.get(f"{prefix}perplexity")
        v["grad_norm"] = train.get("final_grad_norm") if which == "fine-tuned" else None
        v["gpu_memory_gib"] = train.get("peak_gpu_memory_gib") if which == "fine-tuned" else None
    if measured:
        for t in measured["benchmarks"]:
            v[t["key"]] = t.get("pass@1")
        v["bleu"] = measured["bleu"]["bleu_0_1"]
        v["latency_512_s"] = measured["latency"]["total_s"]["p50"] if measured["latency"] else None
    return v


def _training(cfg: Config) -> tuple[dict | None, list[dict]]:
    """The train stage's metrics and its loss history, or (None, []) without a train stage."""
    try:
        trained = read_record(cfg.stage_dir("train"))
        history = Path(trained["outputs"]["log_history"]).read_text().splitlines()
        return trained["metrics"], [json.loads(line) for line in history if line.strip()]
    except FileNotFoundError:
        return None, []


def _write(cfg: Config, criteria: list[Criterion], models: dict, details: dict, history: list[dict]) -> dict:
    """The report, with the people's verdict where votes exist (`ferrylm review`); the human
    criterion gates only with review.required."""
    from ..review import human_verdict

    human = human_verdict(cfg)
    criteria = [replace(c, gate=cfg.review.required) if c.key == "human_correct" else c for c in criteria]
    details = {k: v for k, v in details.items() if k != "human"} | ({"human": human} if human else {})
    models = {m: {**v, "human_correct": human["models"][m]["rate"] if human else None} for m, v in models.items()}
    return write_report(cfg.stage_dir("eval"), criteria, models, details, history, cfg.eval.criteria)


def rewrite_report(cfg: Config) -> dict:
    """`ferrylm report`: the eval report again from its own report.json and the votes so far; nothing
    is generated or executed again. The record stays (under the stage's lock) and is re-written
    after the report, which it must not be older than."""
    out = cfg.stage_dir("eval")
    read_record(out)                               # a finished eval stage, or one line saying to run it
    with stage_lock(out, "eval", withdraw=False):
        record = json.loads((out / "record.json").read_text())
        old = json.loads((out / "report.json").read_text())
        criteria = [Criterion(r["criterion"], r["label"], r["op"], r["target"], r["gate"]) for r in old["criteria"]]
        report = _write(cfg, criteria, old["models"], old["details"], _training(cfg)[1])
        record["metrics"] = {"models": report["models"], "failed_gates": report["failed_gates"]}
        write_json_atomic(out / "record.json", record)
    return report


@locked_stage("eval")
def run_eval(cfg: Config) -> StageRecord:
    from ..serve import server_for, served_model_dir

    e = cfg.eval
    criteria = load_criteria(e.criteria)  # a bad criteria file fails before any server starts
    tracks = benchmark.tracks(e)          # so does a benchmark's missing data
    out = cfg.stage_dir("eval")
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the programs under test run as another uid and must not read our files
    record = StageRecord("eval", cfg.digest())
    data = read_record(cfg.stage_dir("data"))
    pairs = read_jsonl(data["outputs"]["eval_prompts"], e.bleu_limit)
    train, history = _training(cfg)

    def measured_by(generator, label: str) -> dict:
        return measure(cfg, generator, tracks, pairs, out, label)

    measured: dict[str, dict] = {}
    if e.endpoint:
        measured["fine-tuned"] = measured_by(EndpointGenerator(e.endpoint, cfg.serve.served_name), "fine-tuned")
    else:
        targets = {"fine-tuned": served_model_dir(cfg)}
        if e.compare_base:
            targets["base"] = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
        for label, model_dir in targets.items():
            if e.local:
                measured[label] = measured_by(LocalGenerator(model_dir), label)
                continue
            with server_for(cfg, model_dir) as server:
                measured[label] = measured_by(EndpointGenerator(server.url, server.served_name), label)

    labels = ["fine-tuned", "base"] if (e.compare_base and not e.endpoint) or train else ["fine-tuned"]
    models = {m: criteria_values(measured.get(m), train, m) for m in labels}
    criteria = per_track(criteria, {t.key: t.title for t in tracks})
    details = dict(measured)
    if train:
        details["training"] = {k: train[k] for k in ("steps", "first_train_loss", "final_train_loss", "final_grad_norm",
                                                     "tokens_seen", "train_runtime_s", "peak_gpu_memory_gib") if k in train}
        details["training"]["pairs_by_language"] = data["metrics"].get("pairs_by_language", {})
    report = _write(cfg, criteria, models, details, history)
    record.outputs = {name: str(out / f"report.{name}") for name in ("md", "html", "json")}
    for label, d in measured.items():     # every sample, for people to judge (ferrylm review)
        record.outputs[f"heldout:{label}"] = str(out / f"heldout_{label}.jsonl")
        record.outputs.update({f"samples:{label}:{s['benchmark']}/{s['language']}":
                               str(out / benchmark.results_file(s["benchmark"], s["language"], label))
                               for s in d["benchmarks"] if "not_measured" not in s})
    record.metrics = {"models": report["models"], "failed_gates": report["failed_gates"]}
    record.finish(out)
    log.info("report: %s", out / "report.md")
    failed = report["failed_gates"].get("fine-tuned", [])
    if failed and e.enforce_gates:
        raise GateFailed(f"gating criteria failed for the fine-tuned model: {', '.join(failed)} "
                         f"(report: {out / 'report.md'}; eval.enforce_gates=false reports without failing)")
    return record
