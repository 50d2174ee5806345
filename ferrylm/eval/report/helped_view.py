"""How the "did the fine-tune help?" lines are shown: a table of the overall measures by model, the answer in
one sentence, each line with its interval, and a plot of the differences (markdown and HTML)."""

from __future__ import annotations

import textwrap

from .helped import compared, headline, not_rival, num, short, text
from .paired import MIN_BOOTSTRAP

TITLE = "Did the fine-tune help?"
_HOW = (
    "Fine-tuned − base (asked cold, and shown a few training examples where measured) over the same held-out "
    "examples (repositories the training never saw) and the same "
    "benchmark tasks; 95 % interval of the mean per-example difference by paired bootstrap (10,000 resamples), "
    "McNemar's exact test where the outcome is pass/fail. Better / worse only where the interval excludes 0 "
    f"(p < 0.05) over at least {MIN_BOOTSTRAP} examples; lower loss is better."
)


# in another model's cell: ▲ it is significantly better than the fine-tuned model there, ▼ worse
_MARK = {"worse": " ▲", "better": " ▼"}


def table(found: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The first screen: one row per overall measure, a column per model (the others, then the fine-tuned
    one); another model's cell is marked where it is significantly better (▲) or worse (▼) than fine-tuned."""
    overall = [ln for ln in found if ln["scope"] == "all" or "Pass@1" in ln["metric"]]
    others = list(dict.fromkeys(compared(ln) for ln in overall))
    columns = [o for o in others if not not_rival(o)] + ["fine-tuned"] + [o for o in others if not_rival(o)]
    rows: dict[str, dict[str, str]] = {}
    for ln in overall:
        row = rows.setdefault(short(ln).replace(" Pass@1", ""), {})
        row["fine-tuned"] = num(ln["fine-tuned"])
        row[compared(ln)] = num(ln.get("other", ln.get("base"))) + _MARK.get(ln["verdict"], "")
    return ["measure", *columns], [[name, *(r.get(c, "—") for c in columns)] for name, r in rows.items()]


def markdown(found: list[dict]) -> list[str]:
    head, rows = table(found)
    grid = [f"| {' | '.join(head)} |", "|" + "---|" * len(head)] + [f"| {' | '.join(r)} |" for r in rows]
    out = [f"## {TITLE}", "", f"**{headline(found)}**", ""]  # the answer first, as on the page
    out += grid + ["", "▲ / ▼: significantly better / worse than the fine-tuned model.", ""] if rows else []
    out += [_HOW, ""]
    return out + [f"- {text(ln)}" for ln in found] + [""]


def plot(found: list[dict]) -> str | None:
    """Each difference with its interval, turned so that right is better: base64 PNG, or None."""
    if not found:
        return None
    from ...figure import png, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 0.8 + 0.32 * len(found)))
    for i, ln in enumerate(reversed(found)):
        sign = 1 if ln["higher_is_better"] else -1
        lo, hi = sorted(sign * v for v in ln["ci95"])
        scale = max(
            abs(lo), abs(hi), abs(ln["difference"]), 1e-12
        )  # each metric in its own units: shown as a share of its widest end
        color = {"better": "#2a8a2a", "worse": "#c23b3b"}.get(ln["verdict"], "#777")
        ax.plot([lo / scale, hi / scale], [i, i], color=color, lw=2)
        ax.plot([sign * ln["difference"] / scale], [i], "o", color=color)
    ax.axvline(0, color="#333", lw=1)
    ax.set_yticks(
        range(len(found)), [f"{short(ln)} vs {compared(ln)} ({ln['verdict']})" for ln in reversed(found)], fontsize=8
    )
    ax.set_xlim(-1.1, 1.1)
    ax.set_xlabel("fine-tuned − the other model, each scaled to its interval's widest end; right of 0 is better")
    ax.grid(alpha=0.3, axis="x")
    return png(fig)


def _tracks(found: list[dict]) -> dict[str, dict]:
    """Each pass/fail track (a benchmark in one language, or pooled): its tasks, each model's Pass@1, and the
    line against the base (the difference the verdict reads)."""
    tracks: dict[str, dict] = {}
    for ln in found:
        if "Pass@1" not in ln["metric"] or ln.get("unit") != "tasks":
            continue
        t = tracks.setdefault(short(ln).replace(" Pass@1", ""), {"n": ln["n"], "rates": {}, "tasks": {}, "base": None})
        t["rates"].update({compared(ln): ln["other"], "fine-tuned": ln["fine-tuned"]})
        # each model's rate and interval over its own line's tasks (a retrieval column may ask fewer)
        t["tasks"].update({compared(ln): ln["n"], "fine-tuned": ln["n"]})
        if compared(ln) == "base":
            t["base"] = ln
    return tracks


def pass_plot(found: list[dict]) -> str | None:
    """Pass@1 per track, each model's with its 95 % Wilson interval over the track's tasks, and the fine-tuned
    model's difference from the base with McNemar's p at the right: base64 PNG, or None without such a track."""
    tracks = _tracks(found)
    if not tracks:
        return None
    from ...figure import png, pyplot
    from ...review.verdict import wilson

    plt = pyplot()

    models = list(dict.fromkeys(m for t in tracks.values() for m in t["rates"]))
    colors = dict(zip(models, ["#8a8a8a", "#1f6fb4", "#d08a1e", "#7a3fa0", "#2a8a2a", "#c23b3b"]))
    fig, ax = plt.subplots(figsize=(3.4, 0.9 + 0.62 * len(tracks)))
    top, labelled = 0.0, set()
    for i, (name, t) in enumerate(reversed(tracks.items())):
        for j, m in enumerate(models[::-1]):
            if t["rates"].get(m) is None:
                continue
            rate, y = t["rates"][m], i + (j - (len(models) - 1) / 2) * 0.2
            lo, hi = wilson(round(rate * t["tasks"][m]), t["tasks"][m])
            top = max(top, hi)
            ax.errorbar(
                rate,
                y,
                xerr=[[rate - lo], [hi - rate]],
                fmt="o",
                color=colors[m],
                capsize=3,
                ms=5,
                label=None if m in labelled else m,  # each model once in the legend
            )
            labelled.add(m)
        b = t["base"]
        if b is not None:  # the verdict's own numbers: points and McNemar's p, where it ran
            p = f", p = {b['p']:.2g}" if b.get("p") is not None else ""
            ax.annotate(
                f"{100 * b['difference']:+.1f} pts{p}",
                (1.01, i),
                xycoords=("axes fraction", "data"),
                va="center",
                fontsize=8,
            )
    names = [textwrap.fill(f"{name} ({t['n']})", 30) for name, t in reversed(tracks.items())]
    ax.set_yticks(range(len(tracks)), names, fontsize=8)
    ax.set_xlim(0, min(1.0, top * 1.15 + 0.02)), ax.set_ylim(-0.6, len(tracks) - 0.4)
    ax.set_xlabel("Pass@1, 95 % Wilson interval (tasks in brackets)"), ax.grid(alpha=0.3, axis="x")
    drawn = dict(zip(*reversed(ax.get_legend_handles_labels())))  # label → handle, shown in the tracks' order
    ax.legend(
        [drawn[m] for m in models if m in drawn],
        [m for m in models if m in drawn],
        fontsize=8,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=len(models),
    )
    return png(fig)


def to_html(found: list[dict]) -> str:
    import html

    rows = "".join(
        f'<li class="{ln["verdict"].replace(" ", "-")}">{html.escape(text(ln)).replace("**", "")}</li>' for ln in found
    )
    img = plot(found)
    fig = f'<figure><img alt="{TITLE}" src="data:image/png;base64,{img}"></figure>' if img else ""
    head, cells = table(found)
    grid = (
        '<div><table class="helped">'
        + "<tr>"
        + "".join(f"<th>{html.escape(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in cells)
        + "</table><p><small>▲ / ▼: significantly better / worse than the fine-tuned model.</small></p></div>"
        if cells
        else ""
    )
    passes = pass_plot(found)
    # the answer first, then the measures beside each track's Pass@1 with its interval: one screen
    side = (
        f'<figure class="rates"><img alt="Pass@1 per track" src="data:image/png;base64,{passes}"></figure>'
        if passes
        else ""
    )
    return (
        f'<section id="helped"><h2>{TITLE}</h2><p class="headline"><strong>{html.escape(headline(found))}'
        f'</strong></p><div class="first">{grid}{side}</div>'
        f"<p><small>{html.escape(_HOW)}</small></p><ul>{rows}</ul>{fig}</section>"
    )
