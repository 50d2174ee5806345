"""The report: every measured number against the seed's success criteria, base and fine-tuned side by side."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..config import Criteria
from ..manifest import write_json_atomic


@dataclass
class Row:
    key: str
    label: str
    threshold: float
    lower_is_better: bool
    note: str = ""

    def verdict(self, value: Optional[float]) -> str:
        if value is None:
            return "not measured"
        ok = value < self.threshold if self.lower_is_better else value > self.threshold
        return "pass" if ok else "fail"


def criteria_rows(c: Criteria) -> list[Row]:
    return [
        Row("loss", "Held-out loss (answer tokens)", c.loss_max, True),
        Row("perplexity", "Held-out perplexity", c.perplexity_max, True),
        Row("grad_norm", "Gradient norm (last logged step)", c.grad_norm_max, True, "training only"),
        Row("bleu", "BLEU (sacreBLEU/100)", c.bleu_min, False),
        Row("pass_at_1", "HumanEval Pass@1", c.pass_at_1_min, False),
        Row("latency_512_s", "512-token latency (s)", c.latency_512_max_s, True),
    ]


def _fmt(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:.4g}"


def write_report(out_dir: Path, criteria: Criteria, models: dict[str, dict], details: dict) -> dict:
    """models: label → {criterion key → value}. Writes report.md and report.json; returns the JSON."""
    rows = criteria_rows(criteria)
    labels = list(models)
    table = []
    for row in rows:
        entry = {"criterion": row.key, "label": row.label, "threshold": row.threshold,
                 "comparison": "<" if row.lower_is_better else ">"}
        for m in labels:
            value = models[m].get(row.key)
            entry[m] = {"value": value, "verdict": row.verdict(value)}
        table.append(entry)
    report = {"criteria": table, "models": models, "details": details}
    write_json_atomic(out_dir / "report.json", report)

    lines = ["# ferrylm evaluation report", "",
             "Criteria from the seed plan (\"Qwen 2.5 7B Code 双A40训练方案\", 成功标准). "
             "BLEU is sacreBLEU on a 0–100 scale divided by 100.", "",
             "| criterion | target | " + " | ".join(labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for entry in table:
        cells = [f"{_fmt(entry[m]['value'])} ({entry[m]['verdict']})" for m in labels]
        lines.append(f"| {entry['label']} | {entry['comparison']} {entry['threshold']} | " + " | ".join(cells) + " |")
    lines += ["", "## Details", ""]
    for m, d in details.items():
        lines.append(f"### {m}")
        for k, v in d.items():
            lines.append(f"- {k}: {v}")
        lines.append("")
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    return report
