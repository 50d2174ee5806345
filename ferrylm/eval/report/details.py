"""The report's Details: every measured number as a readable table (benchmarks per language,
held-out understanding and generation, latency percentiles and the concurrency sweep, training), rendered as Markdown or HTML."""

from __future__ import annotations

import html

Table = tuple[str, list[str], list[list[str]]]  # title, header, rows

_TRAINING = (
    ("steps", "optimizer steps", "{:d}"),
    ("first_train_loss", "first train loss", "{:.4f}"),
    ("final_train_loss", "final train loss", "{:.4f}"),
    ("final_grad_norm", "final gradient norm", "{:.3f}"),
    ("tokens_seen", "tokens seen", "{:,}"),
    ("train_runtime_s", "training time (s)", "{:.1f}"),
    ("peak_gpu_memory_gib", "peak GPU memory (GiB)", "{:.2f}"),
)


def _num(v: float | None, fmt: str = "{:.3g}") -> str:
    return "—" if v is None else fmt.format(v)


def _benchmarks(details: dict, models: list[str]) -> Table | None:
    summaries = [(m, s["title"], s) for m in models for s in details[m].get("benchmarks") or []]
    if not summaries:
        return None
    ks = sorted({k for _, _, s in summaries for k in s if k.startswith("pass@")}, key=lambda k: int(k[5:]))
    rows = []
    for m, bench, s in summaries:
        if "not_measured" in s:
            rows.append([m, bench, f"not measured: {s['not_measured']}", "", "", *[""] * len(ks), ""])
            continue
        tasks = f"{s['tasks']} of {s['subset_of']}" if "subset_of" in s else str(s.get("tasks", "—"))
        rows.append(
            [
                m,
                bench,
                tasks,
                str(s.get("samples", "—")),
                str(s.get("passed_samples", "—")),
                *[_num(s.get(k), "{:.3f}") for k in ks],
                ", ".join(s.get("isolation", [])),
            ]
        )
    return (
        "Code benchmarks (executed in the sandbox)",
        ["model", "benchmark", "tasks", "samples", "passed", *ks, "isolation"],
        rows,
    )


def _heldout(details: dict, models: list[str]) -> Table | None:
    rows = []
    for m in models:
        h = details[m].get("heldout") or {}
        if "explain" in h:
            x = h["explain"]
            length = (
                f"; summaries {x['mean_words']:.1f} words, references {x['reference_mean_words']:.1f}"
                if "mean_words" in x
                else ""
            )
            rows.append(
                [
                    m,
                    "explain (code understanding)",
                    str(x["examples"]),
                    f"smoothed BLEU-4 {x['smoothed_bleu4']:.2f}{length}",
                    x["signature"],
                ]
            )
        if "generate" in h:
            g = h["generate"]
            kept = "" if g.get("format_kept") is None else f", format kept {g['format_kept']:.0%}"
            rows.append(
                [
                    m,
                    "generate (code generation)",
                    str(g["examples"]),
                    f"BLEU {g['sacrebleu']:.2f}, chrF {g['chrf']:.2f}{kept}",
                    g["signature"],
                ]
            )
    return (
        ("Held-out repositories (corpus scores)", ["model", "task", "examples", "score", "signature"], rows)
        if rows
        else None
    )


def _latency(details: dict, models: list[str]) -> list[Table]:
    rows, sweep = [], []
    for m in models:
        lat = details[m].get("latency")
        if not isinstance(lat, dict):
            continue
        where = "in-process engine" if lat.get("in_process") else "endpoint, streamed"
        for key, label in (
            ("ttft_s", "time to first token (s)"),
            ("tpot_s", "per token (s)"),
            ("total_s", f"total, {lat.get('new_tokens')} tokens (s)"),
            ("tokens_per_s", "tokens/s"),
        ):
            st = lat.get(key) or {}
            rows.append([m, where, label, *[_num(st.get(p), "{:.4g}") for p in ("p50", "p95", "p99")]])
        if lat.get("floor"):  # what the card allows: a miss the GPU's or the engine's
            f, total = lat["floor"], (lat.get("total_s") or {}).get("p50")
            rows.append(
                [
                    m,
                    where,
                    f"floor on {f['gpu']}: {f['weight_gb_per_token']:.2f} GB a token over "
                    f"{f['bandwidth_gb_s']:,.0f} GB/s (s)",
                    _num(f["floor_s"], "{:.4g}"),
                    f"{f['floor_s'] / total:.0%} of the p50" if total else "—",
                    "",
                ]
            )
        for s in lat.get("sweep") or []:
            sweep.append(
                [
                    m,
                    str(s["concurrency"]),
                    _num(s.get("wall_s"), "{:.2f}"),
                    _num(s.get("aggregate_tokens_per_s"), "{:.1f}"),
                    _num((s.get("total_s") or {}).get("p50"), "{:.2f}"),
                ]
            )
    out = []
    if rows:
        runs = next(details[m]["latency"].get("runs") for m in models if isinstance(details[m].get("latency"), dict))
        out.append((f"Latency, batch 1 ({runs} runs)", ["model", "how", "measure", "p50", "p95", "p99"], rows))
    if sweep:
        out.append(
            (
                "Latency under concurrency",
                ["model", "concurrent requests", "wall (s)", "aggregate tokens/s", "total p50 (s)"],
                sweep,
            )
        )
    return out


def _training(details: dict) -> Table | None:
    t = details.get("training")
    if not isinstance(t, dict):
        return None
    rows = [
        [label, fmt.format(t[key]) if isinstance(t.get(key), (int, float)) else "—"]
        for key, label, fmt in _TRAINING
        if key in t
    ]
    return "Training", ["measure", "value"], rows


def _few_shot(details: dict) -> Table | None:
    f = details.get("few_shot")
    if not isinstance(f, dict):
        return None
    rows = [
        [key, str(len(sources)), ", ".join(s or "—" for s in sources)] for key, sources in sorted(f["shown"].items())
    ]
    rows += [
        [key, "0", "no training example of this task and language: asked as it is"]
        for key in f.get("asked_without_examples", [])
    ]
    return (
        f"What the base shown {f['k']} examples saw (training examples, as earlier chat turns)",
        ["task/language", "examples", "functions"],
        rows,
    )


def tables(details: dict) -> list[Table]:
    models = [
        m for m, d in details.items() if m not in ("training", "human", "helped", "few_shot") and isinstance(d, dict)
    ]
    found = [
        _benchmarks(details, models),
        _heldout(details, models),
        *_latency(details, models),
        _training(details),
        _few_shot(details),
    ]
    return [t for t in found if t]


def markdown(details: dict) -> list[str]:
    lines = []
    for title, header, rows in tables(details):
        lines += [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows] + [
            ""
        ]  # BLEU's signature has pipes
    return lines


def to_html(details: dict) -> str:
    out = []
    for title, header, rows in tables(details):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        out.append(f"<h3>{html.escape(title)}</h3><table><tr>{head}</tr>{body}</table>")
    return "".join(out)
