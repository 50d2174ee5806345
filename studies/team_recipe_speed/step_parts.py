"""Where the team recipe's training step spends its time and memory: one micro-batch at a time over a data run's
real rows, split into the tuned model's forward to its last hidden states, the base's forward (the drift
penalty's reference, adapters off), the output layer with the loss and the KL, the backward through the
output layer, and the backward through the decoder; the peak memory of each part; padding's share of the
positions. Variants: the loss over every position's logits (train.fused_head=false) or fused by chunks of answer
tokens (true), rows padded to the longest (a GPU's default) or laid end to end (train.flatten_batches=true).

    python3 studies/team_recipe_speed/step_parts.py --run RUN_DIR --model MODEL_DIR --out parts.json \
        [--variants padded:unfused padded:fused flat:fused] [--batches 24] [dotted overrides...]

RUN_DIR holds a finished data stage; MODEL_DIR a converted model directory; the train section is demo-gpu's
with the overrides. On a CPU it runs the same parts on a tiny model (tests use it), timing only what it can.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

PARTS = ("forward", "base forward", "head, loss, KL", "head backward", "decoder backward")


def _tick() -> float:
    """Now, once the GPU's queued work is done; the peak-memory counter starts again."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def _peak_gib() -> float:
    if not torch.cuda.is_available():
        return 0.0
    peak = torch.cuda.max_memory_allocated() / 2**30
    torch.cuda.reset_peak_memory_stats()
    return peak


def _unfused(head, hidden, base, labels):
    """The model's own loss over every position's logits and kl_from_base's KL, as train.fused_head=false."""
    from ferrylm.prompts import IGNORE_INDEX

    logits = head(hidden).float()
    targets = labels[:, 1:]
    scored = targets != IGNORE_INDEX
    ce = torch.nn.functional.cross_entropy(logits[:, :-1][scored], targets[scored], reduction="sum")
    if base is None:
        return ce, ce.new_zeros(()), int(scored.sum())
    base_logp = torch.log_softmax(head(base).float()[:, :-1][scored], dim=-1)
    kl = (base_logp.exp() * (base_logp - torch.log_softmax(logits[:, :-1][scored], dim=-1))).sum()
    return ce, kl, int(scored.sum())


def one_step(model, inputs: dict, fused: bool, drift: float) -> dict:
    """One micro-batch's forward and backward, part by part: {part: seconds}, {part: peak GiB}, the loss."""
    from ferrylm.train.drift import head_sums, last_hidden

    head = model.get_base_model().get_output_embeddings()
    got: dict = {}

    def base_forward():
        if drift:
            with torch.no_grad(), model.disable_adapter():
                return last_hidden(model, inputs)

    def loss():
        ce, kl, n = (head_sums if fused else _unfused)(head, got["leaf"], got["base forward"], inputs["labels"])
        return (ce + drift * kl) / max(n, 1)

    work = {
        "forward": lambda: last_hidden(model, inputs),
        "base forward": base_forward,
        "head, loss, KL": loss,
        "head backward": lambda: got["head, loss, KL"].backward(),
        "decoder backward": lambda: got["forward"].backward(got["leaf"].grad),
    }
    times, peaks, t = {}, {}, _tick()
    _peak_gib()
    for part in PARTS:
        got[part] = work[part]()
        if part == "forward":  # the two backwards apart: through the head to this leaf, then the decoder
            got["leaf"] = got[part].detach().requires_grad_()
        now = _tick()
        times[part], peaks[part], t = now - t, _peak_gib(), now
    model.zero_grad(set_to_none=True)
    return {"times": times, "peaks": peaks, "loss": float(got["head, loss, KL"].detach())}


def batches(run_dir: Path, size: int, count: int, flatten: bool, pad_id: int) -> list[dict]:
    """`count` micro-batches of `size` rows drawn from the run's training rows (seeded), collated as the trainer
    collates them; each with its padding share."""
    from ferrylm.train.dataset import PadCollator, examples

    rows = examples(json.loads((run_dir / "data" / "record.json").read_text())["outputs"]["train"])
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    collate = PadCollator(pad_id, flatten=flatten, only_scored=False)
    out = []
    for k in range(count):
        chosen = [rows[i] for i in order[k * size : (k + 1) * size]]
        real = sum(len(r["input_ids"]) for r in chosen)
        inputs = collate(chosen)
        out.append({"inputs": inputs, "real": real, "positions": int(inputs["input_ids"].numel())})
    return out


def run_variant(model, run_dir: Path, variant: str, size: int, count: int, drift: float, pad_id: int) -> dict:
    layout, head = variant.split(":")
    device = next(model.parameters()).device
    data = batches(run_dir, size, count + 2, layout == "flat", pad_id)
    rows = []
    for k, b in enumerate(data):
        inputs = {key: v.to(device) for key, v in b["inputs"].items()}
        rows.append(one_step(model, inputs, head == "fused", drift) | {"real": b["real"], "positions": b["positions"]})
    timed = rows[2:]  # two warm-up micro-batches
    seconds = {p: sum(r["times"][p] for r in timed) for p in PARTS}
    total, real = sum(seconds.values()), sum(r["real"] for r in timed)
    return {
        "variant": variant,
        "micro_batches": len(timed),
        "seconds": seconds,
        "share": {p: s / total for p, s in seconds.items()},
        "peak_gib": {p: max(r["peaks"][p] for r in timed) for p in PARTS},
        "tokens_per_s": real / total,
        "padding_share": 1 - real / sum(r["positions"] for r in timed),
        "mean_loss": sum(r["loss"] for r in timed) / len(timed),
    }


def build(model_dir: str, overrides: list[str]):
    from ferrylm.config.loader import load_config
    from ferrylm.train.build import build_model, choose_attention, choose_precision

    cfg = load_config("demo-gpu", ["data.sources=[]", "data.manifest=unused.yaml", *overrides])
    cuda = torch.cuda.is_available()
    model = build_model(
        cfg.train,
        model_dir,
        choose_precision(cfg.train.precision, cuda),
        choose_attention(cfg.train.attention, cuda),
        cuda,
    )
    return model.to("cuda" if cuda else "cpu").train(), cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--variants", nargs="+", default=["padded:unfused", "padded:fused", "flat:fused"])
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    from ferrylm.models import load_tokenizer
    from ferrylm.train.observe import training_sdpa

    model, cfg = build(a.model, a.overrides)
    pad = load_tokenizer(a.model).pad_token_id
    results = []
    with training_sdpa(cfg.train.sdpa_cudnn):
        for v in a.variants:
            results.append(
                run_variant(model, a.run, v, cfg.train.per_device_batch_size, a.batches, cfg.train.drift_penalty, pad)
            )
            r = results[-1]
            print(
                f"{v}: {r['tokens_per_s']:.0f} tokens/s, peak {max(r['peak_gib'].values()):.1f} GiB, padding {r['padding_share']:.0%}, "
                + ", ".join(f"{p} {r['share'][p]:.0%}" for p in PARTS),
                flush=True,
            )
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    a.out.write_text(json.dumps({"device": device, "torch": torch.__version__, "results": results}, indent=1))


if __name__ == "__main__":
    main()
