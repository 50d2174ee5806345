"""Padded against flattened micro-batches on a CPU: how much of a padded batch is padding, and one
forward and backward of LoRA on each layout, over the same seeded batches of the data stage's rows;
flattened twice: with logits at every position, and (as training runs) only at scored positions.

    .venv/bin/python benchmarks/cpu_train_flatten.py runs/default --batches 6 --rounds 2 --out benchmarks/results/x.json

The model is the demo's (real SmolLM2, LoRA r8 on every linear layer, fp32); the losses of the two
layouts are printed beside each other, since they must agree."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from ferrylm.manifest import read_record
from ferrylm.models import resolve_model_path
from ferrylm.train.dataset import PadCollator, examples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = examples(read_record(Path(a.run_dir) / "data")["outputs"]["train"])
    lengths = np.array([len(r) for r in rows["input_ids"]])
    order = np.random.default_rng(0).permutation(len(rows))
    padding = [lengths[b].max() * len(b) / lengths[b].sum() for b in order[: 20 * a.batch_size].reshape(20, -1)]
    batches = [[rows[int(i)] for i in b] for b in order[: a.batches * a.batch_size].reshape(a.batches, -1)]

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        resolve_model_path("smollm2", None), dtype=torch.float32, attn_implementation="sdpa"
    )
    model.config.use_cache = False  # a cache object would hide the packed positions
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear"))
    model.train()
    out = {"padded_over_real_tokens": float(np.mean(padding)), "threads": torch.get_num_threads(), "rounds": []}
    for _ in range(a.rounds):
        got = {}
        for name, collate in (
            ("padded", PadCollator(0)),
            ("flattened", PadCollator(0, flatten=True, only_scored=False)),
            ("flattened, scored positions only", PadCollator(0, flatten=True)),
        ):
            seconds, losses = 0.0, []
            for batch in batches:
                inputs = collate(batch)
                start = time.perf_counter()
                loss = model(**inputs).loss
                loss.backward()
                seconds += time.perf_counter() - start
                model.zero_grad(set_to_none=True)
                losses.append(round(loss.item(), 5))
            got[name] = {"seconds": seconds, "losses": losses}
            print(name, f"{seconds:.2f} s", losses, flush=True)
        out["rounds"].append(got)
    print(f"padded batches hold {out['padded_over_real_tokens']:.2f}× their tokens")
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
