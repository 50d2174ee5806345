"""The export's ONNX artifact on a GPU through onnxruntime-gpu's CUDA execution provider: parity against
PyTorch (greedy continuations equal, max |Δlogit|, forced agreement) and 512-token latency with the KV cache
kept on the GPU (IO binding), beside transformers' generate() in the same precision on the same GPU and
ferrylm's engine on the same weights, in the same run.

    python3 studies/onnx_on_gpu/onnx_gpu.py --merged <run>/export/merged --work /tmp/onnx-gpu --out onnx_gpu.json

The reference is the merged model in fp32 (on the CPU: a reference, not a speed); the artifact is the
export's fp32 ONNX graph, exported into --work if it is not there. Prompts: fixed chat requests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number, with a docstring.",
    "Explain what this code does:\n\ndef f(xs):\n    return sorted(set(xs))[-2]",
    "Write a Go function that reverses a slice of ints in place.",
    "Write a Rust function that counts the vowels in a string.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--merged", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--new-tokens", type=int, default=32, help="greedy tokens compared per prompt")
    ap.add_argument("--latency-tokens", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    import onnxruntime as ort
    import torch

    from ferrylm.engine import Engine
    from ferrylm.export.onnx import OnnxCausalLM, copy_tokenizer, export_onnx
    from ferrylm.export.parity import compare, onnx_outputs, reference_outputs
    from ferrylm.models import load_model, load_tokenizer

    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()  # CUDA's and cuDNN's libraries from the nvidia-* wheels torch brought
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise SystemExit(f"onnxruntime {ort.__version__} has no CUDA provider here: {ort.get_available_providers()}")
    onnx_dir = Path(a.work) / "fp32"
    if not (onnx_dir / "model.onnx").is_file():
        export_onnx(a.merged, onnx_dir)
        copy_tokenizer(Path(a.merged), onnx_dir)
    tok = load_tokenizer(a.merged)
    prompts = [
        tok(
            tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )["input_ids"]
        for p in PROMPTS
    ]
    eos = tok.eos_token_id
    ref = reference_outputs(load_model(a.merged), prompts, a.new_tokens, tok.pad_token_id, eos)
    lm = OnnxCausalLM(onnx_dir, providers=["CUDAExecutionProvider"])
    if lm.session.get_providers()[0] != "CUDAExecutionProvider":
        raise SystemExit(f"the session fell back to {lm.session.get_providers()}: no CUDA there")
    parity = compare(ref, onnx_outputs(lm, prompts, a.new_tokens, (eos,), [r[1] for r in ref]), a.new_tokens)
    result = {
        "command": " ".join(sys.argv),
        "gpu": torch.cuda.get_device_name(),
        "onnxruntime": ort.__version__,
        "providers": lm.session.get_providers(),
        "io_binding": lm.bound,
        "parity": {
            "greedy_tokens_equal": f"{parity.greedy_tokens_equal}/{parity.prompts}",
            "max_abs_logit_diff": parity.max_abs_logit_diff,
            "forced_agreement": parity.forced_agreement,
            "mean_kl": parity.mean_kl,
        },
    }

    def timed(run) -> list[float]:
        run()  # warm-up
        out = []
        for _ in range(a.runs):
            start = time.perf_counter()
            run()
            out.append(time.perf_counter() - start)
        return out

    latency = {"onnx_runtime_cuda_fp32": timed(lambda: lm.generate(prompts[0], a.latency_tokens))}
    hf = load_model(a.merged).to("cuda").eval()
    ids = torch.tensor([prompts[0]], device="cuda")

    def hf_generate() -> None:
        with torch.inference_mode():
            hf.generate(ids, max_new_tokens=a.latency_tokens, min_new_tokens=a.latency_tokens, do_sample=False)
        torch.cuda.synchronize()

    latency["transformers_cuda_fp32"] = timed(hf_generate)
    try:  # the engine is built for Qwen2's shapes; another architecture is recorded, not fatal
        engine = Engine.from_pretrained(a.merged, dtype=torch.bfloat16, max_len=2048, fused=True, gemv=True)
        latency["engine_bf16"] = timed(lambda: engine.generate_timed(prompts[0], a.latency_tokens))
    except Exception as err:  # noqa: BLE001
        result["engine_error"] = f"{type(err).__name__}: {err}"[:500]
    result["latency_s"] = {k: v for k, v in latency.items()}
    result["latency_p50_s"] = {k: statistics.median(v) for k, v in latency.items()}
    result["latency_tokens"] = a.latency_tokens
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
