"""The human verdict from the votes: % correct per model with a Wilson 95% interval, the preference
split, Cohen's kappa between reviewers who judged the same items, and how often people and the
tests agree; rendered as the report's "Human-judged correctness" section."""

from __future__ import annotations

import html
from collections import Counter
from itertools import combinations
from math import sqrt

from .store import VERDICTS

COLUMNS = {"fine-tuned": "fine_tuned", "base": "base"}


def wilson(c: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of c successes in n trials."""
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the interval holds p itself: at 0 of n or n of n its end is p exactly, not a float's hair past it
    return (0.0 if c == 0 else max(0.0, centre - half)), (1.0 if c == n else min(1.0, centre + half))


def cohen_kappa(a: list[str], b: list[str]) -> float | None:
    """Agreement beyond chance of two raters over the same cases; None where chance explains all
    (both always gave one and the same label)."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def summarise(votes: list[dict], items: list[dict], url: str = "") -> dict | None:
    by_id = {item["id"]: (i, item) for i, item in enumerate(items)}
    votes = [v for v in votes if v["item"] in by_id]
    if not votes:
        return None
    models = {}
    for m, col in COLUMNS.items():
        counts = Counter(v[col] for v in votes)
        lo, hi = wilson(counts["correct"], len(votes))
        models[m] = {
            **{k: counts[k] for k in VERDICTS},
            "n": len(votes),
            "rate": counts["correct"] / len(votes),
            "interval": [lo, hi],
        }
    reviewers = sorted({v["reviewer"] for v in votes})
    kappas = []
    for r1, r2 in combinations(reviewers, 2):
        a, b = ({v["item"]: v for v in votes if v["reviewer"] == r} for r in (r1, r2))
        common = sorted(set(a) & set(b))
        if common:
            pairs = [(a[i][c], b[i][c]) for i in common for c in COLUMNS.values()]
            kappas.append(
                {
                    "reviewers": [r1, r2],
                    "items": len(common),
                    "kappa": cohen_kappa([x for x, _ in pairs], [y for _, y in pairs]),
                }
            )
    confusion = {m: {k: {"passed": 0, "failed": 0} for k in VERDICTS} for m in COLUMNS}
    for v in votes:
        execution = by_id[v["item"]][1]["execution"]
        for m, col in COLUMNS.items():
            if execution:
                confusion[m][v[col]]["passed" if execution[m] == "passed" else "failed"] += 1
    judged_run = sum(c["passed"] + c["failed"] for m in confusion for c in confusion[m].values())
    agree = sum(
        confusion[m]["correct"]["passed"] + confusion[m]["partly"]["failed"] + confusion[m]["incorrect"]["failed"]
        for m in confusion
    )
    judged = {v["item"] for v in votes}
    return {
        "models": models,
        "votes": len(votes),
        "items": len(judged),
        "reviewers": reviewers,
        "preference": {k: sum(v["preference"] == k for v in votes) for k in ("fine-tuned", "base", "tie")},
        "kappa": kappas,
        "execution": {
            "confusion": confusion,
            "judged": judged_run,
            "agreement": agree / judged_run if judged_run else None,
        },
        "judged": [
            {"item": i, "id": item["id"], "url": f"{url}/item/{i + 1}" if url else ""}
            for i, item in sorted(by_id.values(), key=lambda t: t[0])
            if item["id"] in judged
        ],
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _lines(s: dict) -> tuple[list[list[str]], list[str], list[list[str]]]:
    """The per-model rows, the sentences, and the agreement-with-tests rows."""
    rows = [
        [
            m,
            f"{_pct(d['rate'])} ({_pct(d['interval'][0])}–{_pct(d['interval'][1])})",
            str(d["correct"]),
            str(d["partly"]),
            str(d["incorrect"]),
            str(d["n"]),
        ]
        for m, d in s["models"].items()
    ]
    p = s["preference"]
    said = [
        f"{s['items']} items judged by {len(s['reviewers'])} reviewer(s) ({', '.join(s['reviewers'])}), {s['votes']} votes.",
        f"Preferred: fine-tuned {p['fine-tuned']}, base {p['base']}, tie {p['tie']}.",
    ]
    for k in s["kappa"]:
        value = "undefined (one label throughout)" if k["kappa"] is None else f"{k['kappa']:.2f}"
        said.append(f"Cohen's kappa, {k['reviewers'][0]} vs {k['reviewers'][1]} on {k['items']} common items: {value}.")
    x = s["execution"]
    if x["judged"]:
        said.append(
            f"People and the tests agree on {_pct(x['agreement'])} of {x['judged']} judged outputs that were "
            "also executed (correct ⇔ passed)."
        )
    conf = [
        [m, verdict, str(c["passed"]), str(c["failed"])]
        for m, by in x["confusion"].items()
        for verdict, c in by.items()
        if c["passed"] + c["failed"]
    ]
    return rows, said, conf


def markdown(s: dict) -> list[str]:
    rows, said, conf = _lines(s)
    out = [
        "",
        "## Human-judged correctness",
        "",
        "| model | correct (Wilson 95%) | correct | partly | incorrect | votes |",
        "|---|---|---:|---:|---:|---:|",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        *said,
    ]
    if conf:
        out += [
            "",
            "| model | people said | tests passed | tests failed |",
            "|---|---|---:|---:|",
            *("| " + " | ".join(r) + " |" for r in conf),
        ]
    return out


def _table(head: list[str], body: list) -> str:
    return (
        "<table><tr>"
        + "".join(f"<th>{html.escape(h)}</th>" for h in head)
        + "</tr>"
        + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
        + "</table>"
    )


def to_html(s: dict) -> str:
    rows, said, conf = _lines(s)
    table = _table
    links = ", ".join(
        f'<a href="{html.escape(j["url"])}">{j["item"] + 1}</a>' if j["url"] else str(j["item"] + 1)
        for j in s["judged"]
    )
    return (
        "<h2>Human-judged correctness</h2>"
        + table(["model", "correct (Wilson 95%)", "correct", "partly", "incorrect", "votes"], rows)
        + "".join(f"<p>{html.escape(p)}</p>" for p in said)
        + (table(["model", "people said", "tests passed", "tests failed"], conf) if conf else "")
        + f"<p>Judged items (open with <code>ferrylm review</code> running): {links}</p>"
    )
