"""The eval stage's held-out loss per example: batches in file order with logits at every position (the
code before) against batches of like lengths with logits only where an answer is scored
(ferrylm.eval.heldout.loss.example_losses), alternately, on a demo run's model and held-out rows; the
two must give the same losses.

    .venv/bin/python benchmarks/heldout_loss_speed.py runs/default --rounds 3 --out benchmarks/results/x.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ferrylm.eval.heldout import examples as heldout
from ferrylm.eval.heldout.loss import answered, example_losses, padded
from ferrylm.manifest import read_jsonl, read_record
from ferrylm.models import load_model, load_tokenizer


def every_position(model, tokenizer, rows: list[dict], batch: int = 8) -> list[float | None]:
    """The code before: batches in file order, logits and the softmax at every position, the unscored
    ones dropped after."""
    out: list[float | None] = [None] * len(rows)
    todo = answered(tokenizer, rows)
    for k in range(0, len(todo), batch):
        chunk = todo[k : k + batch]
        ids, labels, mask = padded([ex for _, ex in chunk], tokenizer.pad_token_id or 0)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
        target = labels[:, 1:]
        nll = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), target, ignore_index=-100, reduction="none"
        )
        for (i, _), v in zip(chunk, (nll.sum(1) / (target != -100).sum(1).clamp(min=1)).tolist()):
            out[i] = v
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=16, help="eval.bleu_limit: held-out rows per task")
    ap.add_argument("--out")
    a = ap.parse_args()
    run = Path(a.run_dir)
    rows = heldout.select(read_jsonl(read_record(run / "data")["outputs"]["eval_prompts"]), a.limit)
    model_dir = read_record(run / "export")["outputs"]["merged"]
    model, tok = load_model(model_dir).eval(), load_tokenizer(model_dir)
    out = {"rows": len(rows), "threads": torch.get_num_threads(), "every_position_s": [], "scored_only_s": []}
    for _ in range(a.rounds):
        for key, fn in (("every_position_s", every_position), ("scored_only_s", example_losses)):
            start = time.perf_counter()
            losses = fn(model, tok, rows)
            out[key].append(time.perf_counter() - start)
            out.setdefault(key.replace("_s", "_losses"), losses)
        print({k: [round(x, 2) for x in v] for k, v in out.items() if k.endswith("_s")}, flush=True)
    pairs = [(x, y) for x, y in zip(out["every_position_losses"], out["scored_only_losses"]) if x is not None]
    out["max_abs_difference"] = max(abs(x - y) for x, y in pairs)
    print(f"{len(pairs)} losses, largest difference {out['max_abs_difference']:.2e}")
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
