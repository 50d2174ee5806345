"""bench.json (every number), bench.md and bench.html (the tables and two plots: training speed against
peak memory, and decoding ms/token per artifact)."""

from __future__ import annotations

import html
from pathlib import Path

from ..manifest import write_json_atomic, write_text_atomic

TRAIN_COLUMNS = [
    ("strategy", "strategy"),
    ("tokens_per_s", "tokens/s"),
    ("tokens_per_s_per_gpu", "tokens/s per GPU"),
    ("mfu", "MFU"),
    ("peak_allocated_gib", "peak allocated GiB"),
    ("peak_reserved_gib", "peak reserved GiB"),
    ("planned_gib", "plan GiB"),
    ("host_rss_gib", "host RSS GiB"),
    ("loss", "loss after timed steps"),
    ("status", "status"),
]
DECODE_COLUMNS = [
    ("artifact", "artifact"),
    ("tokens", "new tokens"),
    ("total_s", "time s"),
    ("ms_per_token", "ms/token"),
    ("ttft_s", "first token s"),
    ("peak_allocated_gib", "peak allocated GiB"),
    ("host_rss_gib", "host RSS GiB"),
    ("status", "status"),
]


def _cell(row: dict, key: str) -> str:
    v = row.get(key)
    if key == "status" and v == "failed":
        return f"failed: {row.get('reason', '')}"
    if key == "mfu" and isinstance(v, float):
        return f"{100 * v:.1f} %"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return "—" if v is None else str(v)


def _table(rows: list[dict], columns) -> list[list[str]]:
    return [[_cell(r, k) for k, _ in columns] for r in rows]


def _memory(row: dict) -> float | None:
    """The peak a strategy is judged by: the GPU's allocated peak, or the process's resident peak on CPU."""
    return row.get("peak_allocated_gib") or row.get("host_rss_gib")


def _plots(results: dict) -> dict[str, str]:
    from ..figure import png, pyplot

    plt = pyplot()

    plots = {}
    done = [r for r in results["training"] if r.get("tokens_per_s") and _memory(r)]
    if done:
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        for r in done:
            ax.scatter(_memory(r), r["tokens_per_s"])
            ax.annotate(
                r["strategy"], (_memory(r), r["tokens_per_s"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
        gpu = any(r.get("peak_allocated_gib") for r in done)
        ax.set_xlabel("peak GPU memory allocated, GiB" if gpu else "peak host memory (RSS), GiB")
        ax.set_ylabel("training tokens/s")
        ax.grid(alpha=0.3)
        plots["Training speed against peak memory"] = png(fig)
    decoded = [r for r in results["decoding"] if r.get("ms_per_token")]
    if decoded:
        fig, ax = plt.subplots(figsize=(6.5, 0.5 + 0.45 * len(decoded)))
        ax.barh([r["artifact"] for r in decoded], [r["ms_per_token"] for r in decoded])
        ax.invert_yaxis()
        ax.set_xlabel(f"ms per token, batch 1, {decoded[0]['tokens']} new tokens")
        plots["Decoding: ms per token by artifact"] = png(fig)
    return plots


def _heading(results: dict) -> list[str]:
    m, rows = results["machine"], results.get("rows") or {}
    lines = [
        f"Machine: {m['device']}, {m['gpus']} GPU(s) visible; torch {m['torch']}.",
        f"Model: {results['model']}. Each strategy: {results['warmup_steps']} untimed + {results['steps']} timed "
        f"steps in its own process; tokens/s is the median of the timed steps. Plan: `ferrylm plan`'s "
        f"allocated peak for the strategy (bf16 strategies on a GPU).",
    ]
    if rows:
        lines.append(
            f"Rows: {rows['kind']} ({rows['seq_len']} tokens), micro-batch {results['micro_batch']} × "
            f"accumulation {results['accumulation']}."
        )
    return lines


def _skipped(skipped: dict[str, str]) -> list[str]:
    return [f"- {name}: not measured, {why}" for name, why in skipped.items()]


def _sections(results: dict):
    """(title, rows, columns, {name: why not measured}) for the training and the decoding table."""
    return (
        ("Training strategies", results["training"], TRAIN_COLUMNS, results["skipped"]),
        ("Decoding", results["decoding"], DECODE_COLUMNS, results["decode_skipped"]),
    )


def markdown(results: dict) -> str:
    out = ["# ferrylm bench", "", *_heading(results), ""]
    for title, rows, columns, skipped in _sections(results):
        out += [f"## {title}", ""]
        if rows:
            out += ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
            out += ["| " + " | ".join(cells) + " |" for cells in _table(rows, columns)]
        out += ["", *(_skipped(skipped) if rows or skipped else ["None in this run."]), ""]
    return "\n".join(out)


def _html(results: dict, plots: dict[str, str]) -> str:
    def table(rows, columns) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for _, h in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in _table(rows, columns)
        )
        return f"<table><tr>{head}</tr>{body}</table>"

    parts = [f"<p>{html.escape(ln)}</p>" for ln in _heading(results)]
    for title, rows, columns, skipped in _sections(results):
        parts.append(
            f"<h2>{title}</h2>" + (table(rows, columns) if rows else "" if skipped else "<p>None in this run.</p>")
        )
        parts += [f"<p>{html.escape(ln[2:])}</p>" for ln in _skipped(skipped)]
    parts += [
        f'<h2>{html.escape(t)}</h2><img alt="{html.escape(t)}" src="data:image/png;base64,{b64}">'
        for t, b64 in plots.items()
    ]
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:75em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}td:first-child{text-align:left}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>ferrylm bench</title><style>{style}</style>"
        f"</head><body><h1>ferrylm bench</h1>{''.join(parts)}</body></html>"
    )


def write(out: Path, results: dict) -> dict[str, str]:
    paths = {"json": out / "bench.json", "md": out / "bench.md", "html": out / "bench.html"}
    write_json_atomic(paths["json"], results)
    write_text_atomic(paths["md"], markdown(results))
    write_text_atomic(paths["html"], _html(results, _plots(results)))
    return {k: str(v) for k, v in paths.items()}
