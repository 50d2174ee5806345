"""Eval stage: HumanEval Pass@k, BLEU and latency against live endpoints, training numbers, the report.

With `eval.endpoint` set, the running endpoint is measured as the fine-tuned model; with
`eval.local=true` the models run in-process with transformers (no latency then). Otherwise the
stage starts vLLM itself on the exported model and (with `eval.compare_base`) on the base model,
one after the other, so both are measured the same way.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import FerryError
from ..config import Config
from ..log import get_logger
from ..manifest import StageRecord, locked_stage, read_record
from ..models import resolve_model_path
from . import humaneval
from .criteria import load_criteria, per_language
from .generators import EndpointGenerator, LocalGenerator
from ..data import read_jsonl
from .quality import bleu, engine_latency, latency
from .report import write_report

log = get_logger("eval")


class GateFailed(FerryError, RuntimeError):
    """A gating criterion failed; the report is written, the exit code says so."""

    exit_code = 3


def measure(cfg: Config, generator, problems: list[dict], pairs: list[dict], out: Path, label: str,
            of: int) -> dict:
    """HumanEval (`problems`, of `of` tasks) and BLEU through `generator`; latency too when it is an
    endpoint (it needs streaming)."""
    e = cfg.eval
    log.info("[%s] HumanEval (%s prompts): %d tasks × %d samples", label, e.prompt_mode, len(problems), e.samples_per_task)
    samples = humaneval.generate(generator, problems, e.max_new_tokens, e.concurrency, e.prompt_mode,
                                 e.samples_per_task, e.temperature, what=f"[{label}] HumanEval generation")
    results = humaneval.execute(problems, samples, e.exec_timeout_s, e.exec_memory_mb, e.exec_workers,
                                e.exec_unconfined, what=f"[{label}] HumanEval execution")
    _write_results(out / f"humaneval_{label}.jsonl", results, samples)
    he = humaneval.summarise(results, e.pass_k, of=of)
    hx = humaneval_x_measure(cfg, generator, out, label) if "humaneval-x" in e.benchmarks else None
    log.info("[%s] BLEU on %d held-out pairs", label, len(pairs))
    b = bleu(generator, pairs, e.max_new_tokens, e.concurrency)
    lat = None
    if isinstance(generator, EndpointGenerator):
        log.info("[%s] latency of %d new tokens, %d runs, concurrency %s", label, e.latency_new_tokens,
                 e.latency_runs, e.latency_concurrency)
        lat = latency(generator.base_url, generator.model, e.latency_new_tokens, e.latency_runs, e.latency_concurrency)
    elif getattr(generator, "engine", None) is not None:
        log.info("[%s] latency of %d new tokens in-process, %d runs", label, e.latency_new_tokens, e.latency_runs)
        lat = engine_latency(generator, e.latency_new_tokens, e.latency_runs)
    out_row = {"humaneval": he, "pass_at_1": he.get("pass@1"), "bleu": b, "latency": lat}
    if hx is not None:
        out_row["humaneval_x"] = hx
    return out_row


def humaneval_x_measure(cfg: Config, generator, out: Path, label: str) -> dict:
    """HumanEval-X per language: a summary like HumanEval's, or why that language was not measured."""
    from . import humaneval_x

    e = cfg.eval
    per_language: dict[str, dict] = {}
    chosen: dict[str, tuple[int, list[dict]]] = {}
    for lang in e.humaneval_x_languages:
        if (why := humaneval_x.unavailable(lang, e.humaneval_x_dir)) is not None:
            per_language[lang] = {"not_measured": why}
            continue
        every = humaneval_x.load_problems(lang, e.humaneval_x_dir)
        chosen[lang] = (len(every), humaneval.select(every, e.humaneval_x_limit, e.subset_seed))
    if not chosen:
        return per_language
    log.info("[%s] HumanEval-X %s × %d samples", label,
             ", ".join(f"{lang}: {len(ps)} tasks" for lang, (_, ps) in chosen.items()), e.samples_per_task)
    samples = humaneval_x.generate(generator, {lang: ps for lang, (_, ps) in chosen.items()}, e.max_new_tokens,
                                   e.concurrency, e.prompt_mode, e.samples_per_task, e.temperature,
                                   what=f"[{label}] HumanEval-X generation")
    for lang, (total, problems) in chosen.items():
        results = humaneval_x.execute_samples(lang, problems, samples[lang], timeout_s=max(e.exec_timeout_s, 20.0),
                                              memory_mb=e.exec_memory_mb, workers=e.exec_workers,
                                              unconfined=e.exec_unconfined, what=f"[{label}] HumanEval-X {lang} execution",
                                              data=e.humaneval_x_dir)
        _write_results(out / f"humaneval_x_{lang}_{label}.jsonl", results, samples[lang])
        per_language[lang] = humaneval.summarise(results, e.pass_k, of=total)
    return {lang: per_language[lang] for lang in e.humaneval_x_languages}


def _write_results(path: Path, results: list[dict], samples: list[tuple[str, str]]) -> None:
    with open(path, "w") as fh:
        for r, (_, completion) in zip(results, samples):
            fh.write(json.dumps({**r, "completion": completion}) + "\n")


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
        for lang, s in (measured.get("humaneval_x") or {}).items():
            v[f"pass_at_1_{lang}"] = s.get("pass@1")
        v["bleu"] = measured["bleu"]["bleu_0_1"]
        v["pass_at_1"] = measured["pass_at_1"]
        v["latency_512_s"] = measured["latency"]["total_s"]["p50"] if measured["latency"] else None
    return v


@locked_stage("eval")
def run_eval(cfg: Config) -> StageRecord:
    from ..serve import server_for, served_model_dir

    e = cfg.eval
    criteria = load_criteria(e.criteria)  # a bad criteria file fails before any server starts
    if "humaneval-x" in e.benchmarks:     # so does a missing HumanEval-X copy
        from . import humaneval_x

        for lang in e.humaneval_x_languages:
            humaneval_x.load_problems(lang, e.humaneval_x_dir, 1)
    out = cfg.stage_dir("eval")
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the programs under test run as another uid and must not read our files
    record = StageRecord("eval", cfg.digest())
    every = humaneval.load_problems()
    problems = humaneval.select(every, e.humaneval_limit, e.subset_seed)
    data = read_record(cfg.stage_dir("data"))
    pairs = read_jsonl(data["outputs"]["eval_prompts"], e.bleu_limit)
    try:
        train = read_record(cfg.stage_dir("train"))["metrics"]
        history_file = cfg.stage_dir("train") / "log_history.jsonl"
        history = [json.loads(line) for line in history_file.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        train, history = None, []

    def measured_by(generator, label: str) -> dict:
        return measure(cfg, generator, problems, pairs, out, label, of=len(every))

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
    measured_languages = list(dict.fromkeys(lang for d in measured.values() for lang in d.get("humaneval_x") or {}))
    criteria = per_language(criteria, measured_languages)
    details = dict(measured)
    if train:
        details["training"] = {k: train[k] for k in ("steps", "first_train_loss", "final_train_loss", "final_grad_norm",
                                                     "tokens_seen", "train_runtime_s", "peak_gpu_memory_gib") if k in train}
        details["training"]["pairs_by_language"] = data["metrics"].get("pairs_by_language", {})
    report = write_report(out, criteria, models, details, history, e.criteria)
    record.outputs = {name: str(out / f"report.{name}") for name in ("md", "html", "json")}
    record.metrics = {"models": models, "failed_gates": report["failed_gates"]}
    record.finish(out)
    log.info("report: %s", out / "report.md")
    failed = report["failed_gates"].get("fine-tuned", [])
    if failed and e.enforce_gates:
        raise GateFailed(f"gating criteria failed for the fine-tuned model: {', '.join(failed)} "
                         f"(report: {out / 'report.md'}; eval.enforce_gates=false reports without failing)")
    return record
