"""LoRA training speed and peak memory of Qwen2.5-7B shapes on one GPU, variants in one run.

    python3 benchmarks/lora_speed.py --out lora_speed.json

Random bf16 weights, LoRA r16 α32 on all seven linear layers, seq 4096, micro-batch 1, SDPA,
AdamW on the adapter, random tokens; 2 warm-up steps then 6 timed. Variants: HF + PEFT with and
without gradient checkpointing (the anchors), Liger kernels (RMSNorm, SwiGLU, RoPE, fused
linear + cross-entropy: the 4096 × 152,064 logits are never materialised), and checkpointing
only a fraction of the layers (selective), alone and with Liger.

`--answer-share F`: the labels score only that share of the positions (a row packed with examples of
a 70 % prompt and a 30 % answer, at F = 0.3, as in the demo's data), and the "scored positions only"
variants compute the output layer and the loss only there, as a one-row micro-batch does in training
(`ferrylm.train.dataset.scored_positions`); the loss is the same.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import torch

SEQ, R = 4096, 16


def build(liger: bool):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2ForCausalLM

    from ferrylm.shapes import qwen7b_config

    if liger:
        from liger_kernel.transformers import apply_liger_kernel_to_qwen2

        apply_liger_kernel_to_qwen2(
            rope=True, rms_norm=True, swiglu=True, cross_entropy=False, fused_linear_cross_entropy=True
        )
    config = qwen7b_config(use_cache=False, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    lora = LoraConfig(
        r=R,
        lora_alpha=32,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    )
    return get_peft_model(model, lora)


def labels_and_kept(ids: torch.Tensor, answer_share: float, example: int = 512) -> tuple[torch.Tensor, dict]:
    """Labels scoring the last `answer_share` of each `example`-long stretch of the row (all of them at 1),
    and the inputs that keep only the scored positions' logits."""
    labels = ids.clone()
    prompt = int(example * (1 - answer_share))
    at = torch.arange(ids.shape[1], device=ids.device) % example
    labels[:, at < prompt] = -100
    targets = labels[0, 1:]
    keep = (targets != -100).nonzero().squeeze(1)
    return labels, {"logits_to_keep": keep, "shift_labels": targets[keep].unsqueeze(0)}


def run(
    name: str,
    liger: bool,
    ckpt_fraction: float,
    compile_layers: bool = False,
    scored: bool = False,
    answer_share: float = 1.0,
    steps: int = 6,
) -> dict:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = build(liger)
    if ckpt_fraction > 0:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
        layers = model.base_model.model.model.layers
        keep = round(ckpt_fraction * len(layers))
        for i, layer in enumerate(layers):  # selective: only the first `keep` layers recompute
            layer.gradient_checkpointing = i < keep
    if compile_layers:  # regional compilation: each decoder layer, not the whole model
        for layer in model.base_model.model.model.layers:
            layer.compile()
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(
        0, model.config.vocab_size, (1, SEQ), device="cuda", generator=torch.Generator("cuda").manual_seed(0)
    )
    labels, kept = labels_and_kept(ids, answer_share)
    kept = kept if scored else {}
    times, first_loss = [], None
    for step in range(2 + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=labels, **kept).loss
        if first_loss is None:
            first_loss = float(loss)  # same weights, same tokens: equal across correct variants
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= 2:
            times.append(time.perf_counter() - t0)
    out = {
        "variant": name,
        "liger": liger,
        "checkpoint_fraction": ckpt_fraction,
        "compiled_layers": compile_layers,
        "answer_share": answer_share,
        "scored_positions_only": scored,
        "tokens_per_s": SEQ * len(times) / sum(times),
        "step_s": sum(times) / len(times),
        "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
        "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30,
        "first_loss": first_loss,
        "loss_after_steps": float(loss),
    }
    print(json.dumps(out), flush=True)
    del model, opt, loss
    gc.collect()
    return out


VARIANTS = {
    "hf+peft, checkpointing": (False, 1.0),
    "hf+peft, no checkpointing": (False, 0.0),
    "hf+peft, checkpointing half the layers": (False, 0.5),
    "liger, checkpointing": (True, 1.0),
    "liger, no checkpointing": (True, 0.0),
    "liger, checkpointing a quarter of the layers": (True, 0.25),
    "liger, checkpointing half the layers": (True, 0.5),
    "hf+peft, compiled layers, no checkpointing": (False, 0.0, True),
    "hf+peft, compiled layers, checkpointing a quarter of the layers": (False, 0.25, True),
    "liger, compiled layers, no checkpointing": (True, 0.0, True),
    "liger, compiled layers, checkpointing a quarter of the layers": (True, 0.25, True),
    "hf+peft, compiled layers, no checkpointing, scored positions only": (False, 0.0, True, True),
    "liger, compiled layers, no checkpointing, scored positions only": (True, 0.0, True, True),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None, help="variant names separated by ';'")
    ap.add_argument("--answer-share", type=float, default=1.0, help="the share of positions the labels score")
    args = ap.parse_args()
    names = args.only.split(";") if args.only else list(VARIANTS)
    results = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "seq_len": SEQ,
        "lora_r": R,
        "answer_share": args.answer_share,
        "runs": [],
    }
    # Liger patches Qwen2's classes in place: every non-Liger variant runs first.
    for name in sorted(names, key=lambda n: VARIANTS[n][0]):
        try:
            results["runs"].append(run(name, *VARIANTS[name], answer_share=args.answer_share))
        except torch.OutOfMemoryError as e:
            results["runs"].append({"variant": name, "error": f"OOM: {str(e)[:200]}"})
            gc.collect()
            torch.cuda.empty_cache()
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
