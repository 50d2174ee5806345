"""Do compiled decoder layers give the same LoRA gradients as eager ones? (Qwen2.5-7B widths, 4 layers)

    python3 studies/decode_kernels/compile_grad_check.py --out compile_grad_check.json

Same weights, same tokens: one forward/backward eager, one with each decoder layer compiled, in
bf16 and in fp32; compares the loss and every LoRA gradient (relative L2 difference), then runs
8 AdamW steps both ways and compares the losses.
"""

from __future__ import annotations

import argparse
import copy
import json

import torch

from ferrylm.shapes import VOCAB


def build(dtype):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2ForCausalLM

    from ferrylm.shapes import qwen7b_config

    config = qwen7b_config(num_hidden_layers=4, use_cache=False, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(config).to(dtype)
    lora = LoraConfig(
        r=16,
        lora_alpha=32,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    )
    model = get_peft_model(model, lora)
    torch.manual_seed(1)
    for n, p in model.named_parameters():  # non-zero B so every LoRA gradient is non-trivial
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.01)
    return model


def grads(model, ids) -> tuple[float, dict]:
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return float(loss), {n: p.grad.float().clone() for n, p in model.named_parameters() if p.requires_grad}


def steps(model, ids, n=8) -> list[float]:
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    out = []
    for _ in range(n):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        out.append(float(loss))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ids = torch.randint(0, VOCAB, (1, 2048), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    result = {}
    for dtype in (torch.float32, torch.bfloat16):
        eager = build(dtype)
        compiled = copy.deepcopy(eager)
        for layer in compiled.base_model.model.model.layers:
            layer.compile()
        le, ge = grads(eager, ids)
        lc, gc = grads(compiled, ids)
        rel = {n: ((ge[n] - gc[n]).norm() / ge[n].norm().clamp(min=1e-30)).item() for n in ge}
        worst = max(rel, key=rel.get)
        result[str(dtype)] = {
            "loss_eager": le,
            "loss_compiled": lc,
            "max_rel_grad_diff": rel[worst],
            "worst_param": worst,
            "median_rel_grad_diff": sorted(rel.values())[len(rel) // 2],
            "losses_eager_8_steps": steps(eager, ids),
            "losses_compiled_8_steps": steps(compiled, ids),
        }
        print(json.dumps({str(dtype): result[str(dtype)]}), flush=True)
        del eager, compiled
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
