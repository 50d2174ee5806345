"""Measure per-GPU peak memory of training steps and compare with `ferrylm plan`'s prediction.

    python benchmarks/measure_peak_memory.py --out peaks.json      # on a GPU machine

Qwen2.5-7B's exact shapes with random bf16 weights, HF transformers + PEFT, SDPA attention, random
tokens, three optimizer steps per configuration (the first allocates the optimizer state). Measured:
torch's peak reserved memory plus the CUDA context (what the card really has to hold), and peak
allocated for reference.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import torch
from transformers import Qwen2ForCausalLM

from ferrylm.shapes import VOCAB, qwen7b_config
from ferrylm.train.plan import GiB, Setup, estimate

# First set: measured before the planner's two corrections (see docs/memory_planner.md).
CONFIGS = [
    dict(method="lora", gradient_checkpointing=True, seq_len=4096, micro_batch=1),
    dict(method="lora", gradient_checkpointing=False, seq_len=4096, micro_batch=1),
    dict(method="lora", gradient_checkpointing=True, seq_len=2048, micro_batch=4),
    dict(method="lora", gradient_checkpointing=False, seq_len=1024, micro_batch=2),
    dict(method="lora", gradient_checkpointing=True, seq_len=8192, micro_batch=1, lora_dropout=0.0),
    dict(method="full", gradient_checkpointing=True, seq_len=2048, micro_batch=1, optimizer_precision="bf16"),
    dict(method="full", gradient_checkpointing=False, seq_len=1024, micro_batch=1, optimizer_precision="bf16"),
]
# Held-out set: measured after the corrections, never used to shape the planner.
HELD_OUT = [
    dict(method="lora", lora_r=64, gradient_checkpointing=True, seq_len=4096, micro_batch=2),
    dict(method="lora", gradient_checkpointing=False, seq_len=2048, micro_batch=2, lora_dropout=0.0),
    dict(method="lora", lora_r=8, gradient_checkpointing=False, seq_len=3072, micro_batch=1),
    dict(method="lora", gradient_checkpointing=True, seq_len=16384, micro_batch=1),
    dict(method="full", gradient_checkpointing=True, seq_len=4096, micro_batch=2, optimizer_precision="bf16"),
    dict(method="full", gradient_checkpointing=False, seq_len=2048, micro_batch=2, optimizer_precision="bf16"),
]

# Second held-out set: measured after the third correction (LoRA's input copy without dropout).
HELD_OUT_2 = [
    dict(method="lora", lora_r=32, gradient_checkpointing=True, seq_len=4096, micro_batch=4, lora_dropout=0.0),
    dict(method="lora", gradient_checkpointing=False, seq_len=3072, micro_batch=1, lora_dropout=0.0),
    dict(method="lora", gradient_checkpointing=False, seq_len=1024, micro_batch=4, lora_dropout=0.1),
    dict(method="full", gradient_checkpointing=True, seq_len=8192, micro_batch=1, optimizer_precision="bf16"),
    dict(method="full", gradient_checkpointing=False, seq_len=4096, micro_batch=1, optimizer_precision="bf16"),
]


def build() -> Qwen2ForCausalLM:
    cfg = qwen7b_config(attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        return Qwen2ForCausalLM(cfg).to(torch.bfloat16)


def run(spec: dict, context_gib: float) -> dict:
    from peft import LoraConfig, get_peft_model

    setup = Setup(**spec, gpu_memory_gib=139.8)
    model = build()
    if setup.method == "lora":
        model = get_peft_model(
            model,
            LoraConfig(
                r=setup.lora_r,
                lora_alpha=2 * setup.lora_r,
                lora_dropout=setup.lora_dropout,
                target_modules="all-linear",
                task_type="CAUSAL_LM",
            ),
        )
    if setup.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if setup.method == "lora":
            model.enable_input_require_grads()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ids = torch.randint(0, VOCAB, (setup.micro_batch, setup.seq_len), device="cuda")
    t = time.perf_counter()
    for _ in range(3):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    secs = (time.perf_counter() - t) / 3
    measured = torch.cuda.max_memory_reserved() / GiB + context_gib
    plan = estimate(setup)
    row = {
        **spec,
        "measured_gib": round(measured, 2),
        "allocated_peak_gib": round(torch.cuda.max_memory_allocated() / GiB, 2),
        "predicted_gib": round(plan.total_gib, 2),
        "error_pct": round(100 * (plan.total_gib / measured - 1), 1),
        "tokens_per_s": round(setup.seq_len * setup.micro_batch / secs),
    }
    del model, opt, params, loss, ids
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="peaks.json")
    ap.add_argument("--set", choices=["first", "held-out", "held-out-2"], default="first")
    args = ap.parse_args()
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    context = (total - free) / GiB  # the CUDA context and driver allocations, before any tensor
    rows = []
    for spec in {"first": CONFIGS, "held-out": HELD_OUT, "held-out-2": HELD_OUT_2}[args.set]:
        try:
            rows.append(run(spec, context))
        except torch.OutOfMemoryError:
            rows.append({**spec, "measured_gib": "OOM"})
            gc.collect()
            torch.cuda.empty_cache()
        print(json.dumps(rows[-1]), flush=True)
    json.dump(
        {"gpu": torch.cuda.get_device_name(), "context_gib": context, "rows": rows}, open(args.out, "w"), indent=2
    )


if __name__ == "__main__":
    main()
