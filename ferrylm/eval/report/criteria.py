"""Success criteria as data: a YAML of {key: {label, op, target, gate}}, shipped or the user's own."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from ...config import ConfigError
from .helped import artifact_kind

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@dataclass
class Criterion:
    key: str
    label: str
    op: str
    target: float
    gate: bool = True

    def verdict(self, value: float | None) -> str:
        if value is None:
            return "not measured"
        return "pass" if _OPS[self.op](value, self.target) else "fail"


def load_criteria(source: str = "seed") -> list[Criterion]:
    """A shipped criteria set by name (ferrylm/criteria/NAME.yaml) or a YAML path."""
    shipped = resources.files("ferrylm") / "criteria" / f"{source}.yaml"
    path = Path(source)
    text = (
        path.read_text()
        if path.suffix in (".yaml", ".yml") and path.is_file()
        else (shipped.read_text() if shipped.is_file() else None)
    )
    if text is None:
        raise ConfigError(f"eval.criteria: {source!r} is neither a YAML file nor a shipped criteria set")
    out = []
    for key, spec in (yaml.safe_load(text) or {}).items():
        if not isinstance(spec, dict) or spec.get("op") not in _OPS or not isinstance(spec.get("target"), (int, float)):
            raise ConfigError(f"eval.criteria: {key}: needs op (one of {', '.join(_OPS)}) and a numeric target")
        out.append(
            Criterion(key, spec.get("label", key), spec["op"], float(spec["target"]), bool(spec.get("gate", True)))
        )
    return out


def per_track(criteria: list[Criterion], tracks: dict[str, str]) -> list[Criterion]:
    """A criterion for each benchmark track's key (key → title, e.g. pass_at_1_cpp → "HumanEval-X cpp"):
    as the criteria file sets it, else the file's Pass@1 criterion applied to that track (the seed's
    > 0.4 holds for each language)."""
    have = {c.key for c in criteria}
    base = next((c for c in criteria if c.key == "pass_at_1"), None)
    extra = [
        Criterion(key, f"{title} Pass@1", base.op, base.target, base.gate)
        for key, title in tracks.items()
        if base is not None and key not in have
    ]
    return criteria + extra


def with_pass_at_1_lost(models: dict[str, dict]) -> dict[str, dict]:
    """Each quantized artifact's HumanEval Pass@1 lost against the fine-tuned model it was exported from (the
    criterion pass_at_1_lost); None for every other column."""
    ft = models.get("fine-tuned", {}).get("pass_at_1")
    for label, v in models.items():
        art = v.get("pass_at_1")
        shipped = artifact_kind(label) and ft is not None and art is not None
        v["pass_at_1_lost"] = round(ft - art, 6) if shipped else None
    return models


def gate_failures(failed_gates: dict[str, list[str]]) -> list[str]:
    """The gates that fail the stage: the fine-tuned model's, and what a quantized artifact loses against it (its
    own absolute numbers are the fine-tuned model's to meet)."""
    lost = [f"{m}: pass_at_1_lost" for m, keys in failed_gates.items() if artifact_kind(m) and "pass_at_1_lost" in keys]
    return failed_gates.get("fine-tuned", []) + lost


def criteria_values(measured: dict | None, train: dict | None, which: str) -> dict:
    """Each criterion's number for one model ('fine-tuned', 'base' or the few-shot base); None where not
    measured (the training numbers are the fine-tuned and the cold base model's)."""
    v: dict = {}
    if train and which in ("fine-tuned", "base"):
        prefix = "" if which == "fine-tuned" else "base_"
        v["loss"] = train.get(f"{prefix}eval_loss")
        v["perplexity"] = train.get(f"{prefix}perplexity")
        v["grad_norm"] = train.get("final_grad_norm") if which == "fine-tuned" else None
        v["gpu_memory_gib"] = train.get("peak_gpu_memory_gib") if which == "fine-tuned" else None
    if measured:
        for t in measured["benchmarks"]:
            v[t["key"]] = t.get("pass@1")
        explain = (measured.get("heldout") or {}).get("explain")
        v["bleu"] = explain["smoothed_bleu4"] / 100 if explain else None  # the seed's code understanding BLEU
        v["latency_512_s"] = measured["latency"]["total_s"]["p50"] if measured["latency"] else None
    return v
