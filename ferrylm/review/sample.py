"""The items people judge: a fixed, seeded sample of what the eval stage generated, stratified over
held-out pairs per language and benchmark tasks per language, each with both models' outputs.

The sample is drawn once and kept (`<run>/review/items.json`): votes refer to it, so re-running eval
or re-writing the report never changes what was judged. Which model shows as A is drawn per item.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from ..errors import FerryError
from ..manifest import write_json_atomic

MODELS = ("fine-tuned", "base")


class ReviewError(FerryError, ValueError):
    pass


def _rows(path: str) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _heldout(outputs: dict[str, str]) -> list[dict]:
    ft, base = (_rows(outputs[f"heldout:{m}"]) for m in MODELS)
    items = []
    for i, (a, b) in enumerate(zip(ft, base)):
        kind = {"explain": "held-out summary", "generate": "held-out body"}.get(a.get("task"), "held-out pair")
        items.append(
            {
                "id": f"heldout/{i}",
                "kind": kind,
                "language": a.get("language") or "text",
                "source": a.get("source"),
                "prompt": a["messages"][-1]["content"],
                "reference": a["reference"],
                "outputs": {"fine-tuned": a["output"], "base": b["output"]},
                "execution": None,
            }
        )
    return items


def _tasks(outputs: dict[str, str]) -> list[dict]:
    items = []
    for key, path in outputs.items():
        if not key.startswith("samples:fine-tuned:") or f"samples:base:{key[19:]}" not in outputs:
            continue
        track = key[len("samples:fine-tuned:") :]  # <benchmark>/<language>
        base = {r["task_id"]: r for r in _rows(outputs[f"samples:base:{track}"])}
        seen = set()
        for r in _rows(path):
            if r["task_id"] in seen or r["task_id"] not in base:
                continue  # with n > 1 samples, the first of each task
            seen.add(r["task_id"])
            b = base[r["task_id"]]
            items.append(
                {
                    "id": f"{track.split('/')[0]}/{r['task_id']}",
                    "kind": track.split("/")[0],
                    "language": track.split("/")[1],
                    "source": r["task_id"],
                    "prompt": r.get("prompt", ""),
                    "reference": r.get("reference") or "",
                    "outputs": {"fine-tuned": r["completion"], "base": b["completion"]},
                    "execution": {"fine-tuned": r["result"], "base": b["result"]},
                }
            )
    return items


def draw(outputs: dict[str, str], n: int, seed: int) -> list[dict]:
    """n items, round-robin over the (kind, language) groups, each group in a seeded order."""
    if not all(f"heldout:{m}" in outputs for m in MODELS):
        raise ReviewError(
            "review: the eval stage kept no outputs of both models; run it with eval.compare_base=true "
            "(and not eval.endpoint) first"
        )
    groups: dict[tuple[str, str], list[dict]] = {}
    for item in _heldout(outputs) + _tasks(outputs):
        groups.setdefault((item["kind"], item["language"]), []).append(item)
    rng = random.Random(seed)
    for key in sorted(groups):
        rng.shuffle(groups[key])
    picked: list[dict] = []
    while len(picked) < n and any(groups.values()):
        for key in sorted(groups):
            if groups[key] and len(picked) < n:
                picked.append(groups[key].pop())
    for item in picked:
        item["a"] = random.Random(f"{seed}:{item['id']}").choice(MODELS)  # blind: which model shows as A
    return picked


def load_or_draw(path: Path, outputs: dict[str, str], n: int, seed: int) -> list[dict]:
    if path.is_file():
        return json.loads(path.read_text())
    items = draw(outputs, n, seed)
    if not items:
        raise ReviewError("review: the eval stage's outputs hold nothing to judge")
    write_json_atomic(path, items)
    return items
