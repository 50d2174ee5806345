"""The report: every measured number against the success criteria, models side by side.

Three forms of the same content: report.json (every number), report.md, and report.html — one
self-contained page (inline CSS, plots embedded as PNG data) that opens anywhere.
"""

from __future__ import annotations

import html
from pathlib import Path

from ...figure import png, pyplot
from ...manifest import write_json_atomic
from ...review import verdict
from . import details as report_details
from . import helped_view
from .criteria import Criterion
from .paired import compare, sentence


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}"


def criteria_table(criteria: list[Criterion], models: dict[str, dict]) -> list[dict]:
    table = []
    for c in criteria:
        entry = {"criterion": c.key, "label": c.label, "op": c.op, "target": c.target, "gate": c.gate}
        for m, values in models.items():
            v = values.get(c.key)
            entry[m] = {"value": v, "verdict": c.verdict(v)}
        table.append(entry)
    return table


def failed_gates(table: list[dict], model: str) -> list[str]:
    return [e["criterion"] for e in table if e["gate"] and model in e and e[model]["verdict"] == "fail"]


def _plots(history: list[dict], details: dict, rows: list[dict]) -> dict[str, str]:
    """title → base64 PNG; only plots that have data."""
    plt = pyplot()

    plots = {}
    train = [(h["step"], h["loss"]) for h in history if "loss" in h and "eval_loss" not in h]
    evals = [(h["step"], h["eval_loss"]) for h in history if "eval_loss" in h]
    if train:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot(*zip(*train), label="train loss")
        if evals:
            ax.plot(*zip(*evals), "o--", label="held-out loss")
        ax.set_xlabel("step"), ax.set_ylabel("loss"), ax.legend(), ax.grid(alpha=0.3)
        plots["Training loss"] = png(fig)
    lat = {m: d["latency"]["samples_total_s"] for m, d in details.items() if isinstance(d, dict) and d.get("latency")}
    if lat:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for i, (m, xs) in enumerate(lat.items()):
            ax.scatter(xs, [i] * len(xs), alpha=0.7, label=m)
        ax.set_yticks(range(len(lat)), list(lat)), ax.set_xlabel("512-token completion, seconds"), ax.grid(alpha=0.3)
        plots["Latency distribution"] = png(fig)
    first = rows[0] if rows else None  # the first benchmark's first language: HumanEval by default
    per_task = {m: c["per_task"] for m, c in (first["summaries"] if first else {}).items() if c.get("per_task")}
    if per_task:
        tasks = list(next(iter(per_task.values())))
        fig, ax = plt.subplots(figsize=(max(6, len(tasks) * 0.06), 1 + 0.5 * len(per_task)))
        ax.imshow(
            [[per_task[m].get(t, 0) for t in tasks] for m in per_task], aspect="auto", cmap="Greens", vmin=0, vmax=1
        )
        (
            ax.set_yticks(range(len(per_task)), list(per_task)),
            ax.set_xlabel(f"{first['title']} task (0–{len(tasks) - 1})"),
        )
        plots["Pass@1 per task"] = png(fig)
    if len(rows) > 1:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        models = list(dict.fromkeys(m for r in rows for m in r["summaries"]))
        for i, m in enumerate(models):
            values = [r["summaries"].get(m, {}).get("pass@1") or 0 for r in rows]
            ax.bar([x + i * 0.8 / len(models) for x in range(len(rows))], values, width=0.8 / len(models), label=m)
        ax.set_xticks(
            [x + 0.4 - 0.4 / len(models) for x in range(len(rows))],
            [f"{r['language']}\n{r['pairs']:,} pairs" for r in rows],
        )
        ax.set_ylabel("Pass@1"), ax.set_ylim(0, 1), ax.legend(), ax.grid(alpha=0.3, axis="y")
        plots["Pass@1 by language"] = png(fig)
    return plots


def _summaries(details: dict) -> dict[str, list[dict]]:
    """model → its benchmark tracks' summaries (benchmark.measure's)."""
    return {m: d["benchmarks"] for m, d in details.items() if isinstance(d, dict) and d.get("benchmarks")}


# The columns a preset can leave out, as the report names them (the CPU demo leaves out both).
_NOT_ASKED = {
    "retrieval_off": "retrieval (base + retrieval, fine-tuned + retrieval; eval.retrieval_k=0)",
    "few_shot_off": "the base shown training examples (base 2-shot; eval.few_shot=0)",
}


def subset_note(details: dict) -> str:
    """One sentence when a benchmark ran on a subset of its tasks, so no Pass@1 reads as the full set's."""
    parts = dict.fromkeys(
        f"{s['title']}: {s['tasks']} of {s['subset_of']} tasks"
        for ss in _summaries(details).values()
        for s in ss
        if "subset_of" in s
    )
    left = next((s["canary_left_out"] for ss in _summaries(details).values() for s in ss if "canary_left_out" in s), [])
    canary = (
        f"Left out of HumanEval(-X): the {len(left)} tasks the training's canary chose its checkpoint on "
        f"({', '.join(left)})."
        if left
        else ""
    )
    none = {r: why for ss in _summaries(details).values() for s in ss for r, why in s.get("gave_none", {}).items()}
    gave_none = (
        f"Repositories that gave no task, left out of the own-code Pass@1: {_with_reasons(none)}." if none else ""
    )
    nothing = details.get("own_code_gave_none", {})
    no_track = f"No own-code Pass@1: no repository gave a task: {_with_reasons(nothing)}." if nothing else ""
    subsets = f"Subsets (seeded, the same for every model): {'; '.join(parts)}." if parts else ""
    form = (
        "Every model was asked for the whole function, the form the fine-tune answers in (data.answer=function)."
        if details.get("answer_form") == "function"
        else ""
    )
    off = [what for key, what in _NOT_ASKED.items() if details.get(key)]
    retrieval = (
        f"Not asked: {'; '.join(off)} (the CPU demo's settings, where a 135M model passes none of its own tasks); "
        "the demo-gpu preset measures them."
        if off
        else ""
    )
    return " ".join(x for x in (subsets, canary, gave_none, no_track, ran_with(details), form, retrieval) if x)


def ran_with(details: dict) -> str:
    """Which toolchain ran each repository's own tests (a compiled language's: Python's run in ferrylm's own
    interpreter), so a verdict can be read against the compiler the team builds with."""
    tools: dict[str, set[str]] = {}
    for ss in _summaries(details).values():
        for s in ss:
            for repo, tool in s.get("ran_with", {}).items():
                tools.setdefault(tool, set()).add(repo)
    listed = "; ".join(f"{tool} for {', '.join(sorted(repos))}" for tool, repos in sorted(tools.items()))
    return f"Own code's tests ran with {listed}." if listed else ""


def _with_reasons(repos: dict[str, str]) -> str:
    return "; ".join(f"{r} ({why})" for r, why in sorted(repos.items()))


def language_rows(details: dict) -> list[dict]:
    """Per benchmark and language, in the configured order: the training pairs the data stage
    extracted in that language, each model's Pass@1 (or why it was not measured) and the paired
    test of the fine-tuned model against each other model measured ("paired_vs"; "paired": against
    the base)."""
    per_model = _summaries(details)
    pairs = (details.get("training") or {}).get("pairs_by_language") or {}
    rows: dict[tuple[str, str], dict] = {}
    for m, ss in per_model.items():
        for s in ss:
            row = rows.setdefault(
                (s["benchmark"], s["language"]),
                {
                    "benchmark": s["benchmark"],
                    "language": s["language"],
                    "title": s["title"],
                    "pairs": pairs.get(s["language"], 0),
                    "summaries": {},
                },
            )
            row["summaries"][m] = s
    for row in rows.values():
        cells = row["summaries"]
        row["cells"] = {
            m: (
                _fmt(c["pass@1"])
                + f" ({c['passed_samples']}/{c['samples']}"
                + (f", subset of {c['subset_of']})" if "subset_of" in c else ")")
                if "pass@1" in c
                else f"not measured: {c.get('not_measured', 'no result')}"
            )
            for m, c in cells.items()
        }
        ft = cells.get("fine-tuned", {}).get("per_task")
        # fine-tuned against each other model measured (the base, the base shown a few examples)
        row["paired_vs"] = {
            m: compare(ft, c["per_task"])
            for m, c in cells.items()
            if m != "fine-tuned" and ft is not None and "per_task" in c
        }
        row["paired"] = row["paired_vs"].get("base")
    return _with_pooled(list(rows.values()))


POOLED = "all languages"


def _with_pooled(rows: list[dict]) -> list[dict]:
    """After each own-code benchmark asked in two languages or more, one row over all of its tasks: the team
    asks whether fine-tuning helped its code, and one language's tasks may be too few to tell."""
    out: list[dict] = []
    for bench in dict.fromkeys(r["benchmark"] for r in rows):
        group = [r for r in rows if r["benchmark"] == bench]
        out += group
        if bench.startswith("own-") and len(group) > 1:
            out.append(_pooled(group))
    return out


def _pooled(group: list[dict]) -> dict:
    """The group's tasks as one (task ids kept apart by their language); a model not measured in every
    language is left out of it."""
    models = [m for m in group[0]["summaries"] if all("per_task" in r["summaries"].get(m, {}) for r in group)]
    per_task = {
        m: {f"{r['language']}:{t}": v for r in group for t, v in r["summaries"][m]["per_task"].items()} for m in models
    }
    cells = {
        m: f"{_fmt(sum(v.values()) / len(v))} ({sum(r['summaries'][m]['passed_samples'] for r in group)}/"
        f"{sum(r['summaries'][m]['samples'] for r in group)})"
        for m, v in per_task.items()
    }
    ft = per_task.get("fine-tuned")
    paired_vs = {m: compare(ft, v) for m, v in per_task.items() if m != "fine-tuned" and ft is not None}
    first = group[0]
    return {
        "benchmark": first["benchmark"],
        "language": POOLED,
        "title": first["title"].replace(f"({first['language']}", f"({POOLED}", 1),
        "pairs": sum(r["pairs"] for r in group),
        "summaries": {m: {"pass@1": sum(v.values()) / len(v), "per_task": v} for m, v in per_task.items()},
        "cells": cells,
        "paired_vs": paired_vs,
        "paired": paired_vs.get("base"),
        "pooled": True,
    }


def _paired_text(row: dict, sep: str) -> str:
    return sep.join(sentence(c, "fine-tuned", m) for m, c in row["paired_vs"].items()) or "—"


def _language_md(rows: list[dict], labels: list[str]) -> list[str]:
    if not rows:
        return []
    lines = [
        "",
        "## Pass@1 by benchmark and language",
        "",
        "| benchmark | training pairs in its language | " + " | ".join(labels) + " | is the difference real? |",
        "|---|---:|" + "---|" * (len(labels) + 1),
    ]
    for r in rows:
        lines.append(
            f"| {r['title']} | {r['pairs']:,} | "
            + " | ".join(r["cells"].get(m, "—") for m in labels)
            + f" | {_paired_text(r, '<br>')} |"
        )
    return lines


def _markdown(table: list[dict], labels: list[str], details: dict, source: str, rows: list[dict], note: str) -> str:
    lines = [
        "# ferrylm evaluation report",
        "",
        *helped_view.markdown(details.get("helped") or []),
        "## Success criteria",
        "",
        f"Criteria: {source}. BLEU is code understanding: smoothed BLEU-4 of summaries (0–100) divided by 100.",
        "",
        "| criterion | target | gate | " + " | ".join(labels) + " |",
        "|---|---|---|" + "---|" * len(labels),
    ]
    for e in table:
        cells = [f"{_fmt(e[m]['value'])} ({e[m]['verdict']})" for m in labels]
        lines.append(
            f"| {e['label']} | {e['op']} {e['target']:g} | {'yes' if e['gate'] else 'no'} | " + " | ".join(cells) + " |"
        )
    if note:
        lines += ["", note]
    lines += _language_md(rows, labels)
    if details.get("human"):
        lines += verdict.markdown(details["human"])
    lines += ["", "## Details", "", *report_details.markdown(details)]
    return "\n".join(lines) + "\n"


def _language_html(rows: list[dict], labels: list[str]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(m)}</th>" for m in labels)
    body = "".join(
        f"<tr><td>{html.escape(r['title'])}</td><td>{r['pairs']:,}</td>"
        + "".join(f"<td>{html.escape(r['cells'].get(m, '—'))}</td>" for m in labels)
        + f"<td>{'<br>'.join(html.escape(_paired_text(r, chr(10))).splitlines())}</td></tr>"
        for r in rows
    )
    return (
        f"<h2>Pass@1 by benchmark and language</h2><table><tr><th>benchmark</th><th>training pairs in its language</th>{head}"
        f"<th>is the difference real?</th></tr>{body}</table>"
    )


def _html(
    table: list[dict],
    labels: list[str],
    plots: dict[str, str],
    source: str,
    details: dict,
    languages: list[dict],
    note: str,
) -> str:
    rows = []
    for e in table:
        cells = "".join(
            f'<td class="{e[m]["verdict"].replace(" ", "-")}">{_fmt(e[m]["value"])}<br><small>{e[m]["verdict"]}</small></td>'
            for m in labels
        )
        rows.append(
            f"<tr><td>{html.escape(e['label'])}</td><td>{html.escape(e['op'])} {e['target']:g}</td>"
            f"<td>{'yes' if e['gate'] else 'no'}</td>{cells}</tr>"
        )
    figs = "".join(
        f'<figure><img alt="{html.escape(t)}" src="data:image/png;base64,{b}"><figcaption>{html.escape(t)}'
        f"</figcaption></figure>"
        for t, b in plots.items()
    )
    head = "".join(f"<th>{html.escape(m)}</th>" for m in labels)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>ferrylm evaluation report</title>
<style>body{{font:15px system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:6px 10px;text-align:left}}
.pass{{background:#d9f2d9}}.fail{{background:#f8d7d7}}.not-measured{{background:#eee}}
figure{{display:inline-block;margin:1em}}img{{max-width:100%}}pre{{background:#f6f6f6;padding:1em;white-space:pre-wrap}}
div.first{{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}}figure.rates{{margin:0;flex:1 1 420px;max-width:560px}}
li.better{{color:#1d6b1d}}li.worse{{color:#a12828}}p.headline{{font-size:1.15em}}</style>
</head><body><h1>ferrylm evaluation report</h1>{helped_view.to_html(details.get("helped") or [])}
<h2>Success criteria</h2><p>Criteria: {html.escape(source)}. BLEU is code understanding: smoothed BLEU-4 of summaries (0–100) divided by 100.</p>
<table><tr><th>criterion</th><th>target</th><th>gate</th>{head}</tr>{"".join(rows)}</table>
{f"<p>{html.escape(note)}</p>" if note else ""}
{_language_html(languages, labels)}
{verdict.to_html(details["human"]) if details.get("human") else ""}
<h2>Plots</h2>{figs or "<p>no data to plot</p>"}<h2>Details</h2>{report_details.to_html(details)}</body></html>
"""


def write_report(
    out_dir: Path,
    criteria: list[Criterion],
    models: dict[str, dict],
    details: dict,
    history: list[dict] | None = None,
    source: str = "seed",
) -> dict:
    """models: label → {criterion key → value}. Writes report.{json,md,html}; returns the JSON."""
    table = criteria_table(criteria, models)
    labels = list(models)
    rows, note = language_rows(details), subset_note(details)
    report = {
        "criteria": table,
        "models": models,
        "details": details,
        "paired": {f"{r['benchmark']}/{r['language']}": r["paired"] for r in rows},
        "failed_gates": {m: failed_gates(table, m) for m in labels},
    }
    write_json_atomic(out_dir / "report.json", report)
    md = _markdown(table, labels, details, source, rows, note)
    (out_dir / "report.md").write_text(md)
    plots = _plots(history or [], details, rows)
    (out_dir / "report.html").write_text(_html(table, labels, plots, source, details, rows, note))
    return report
