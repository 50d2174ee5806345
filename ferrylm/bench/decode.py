"""Batch-1 greedy decoding of each artifact the export stage wrote, one process per artifact.

    python -m ferrylm.bench.decode '<spec json>'     (what `ferrylm bench` runs; prints one JSON line)

Every decoder produces exactly `tokens` new tokens (end-of-sequence ignored) from the same prompt,
after one untimed warm-up run (the engine compiles and captures its step there).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field

PROMPT = 'def quicksort(values: list[int]) -> list[int]:\n    """Return the values sorted in ascending order."""\n'


@dataclass
class Target:
    name: str
    what: str
    kind: str  # transformers | engine | onnx
    path: str
    options: dict = field(default_factory=dict)


def targets(export: dict, has_cuda: bool) -> tuple[list[Target], dict[str, str]]:
    """(what to decode, {artifact: why not}) from the export record's outputs."""
    out = export["outputs"]
    run = [Target("merged/transformers", "merged model, transformers generate()", "transformers", out["merged"])]
    skipped = {}
    engine = [
        Target(
            "merged/engine-bf16",
            "merged model, batch-1 engine (fused, CUDA graphs)",
            "engine",
            out["merged"],
            {"fused": True},
        ),
        Target(
            "merged/engine-gemv",
            "merged model, batch-1 engine (Triton matrix-vector kernels)",
            "engine",
            out["merged"],
            {"gemv": True},
        ),
    ]
    if "vllm_w4a16" in out:
        engine += [
            Target(
                "w4a16/engine",
                "W4A16 artifact's 4-bit weights, batch-1 engine (torch's int4 kernel)",
                "engine",
                out["vllm_w4a16"],
                {"w4a16_dir": out["vllm_w4a16"]},
            ),
            Target(
                "w4a16/engine-gemv4",
                "W4A16 artifact's 4-bit weights, batch-1 engine (Triton 4-bit kernel)",
                "engine",
                out["vllm_w4a16"],
                {"w4a16_dir": out["vllm_w4a16"], "gemv": True},
            ),
        ]
    for t in engine:
        if has_cuda:
            run.append(t)
        else:
            skipped[t.name] = "the engine's compiled decode step needs a CUDA GPU"
    if "vllm_fp8" in out:
        skipped["fp8/engine"] = "the package's engine has no FP8 path (vLLM serves the FP8 artifact)"
    run += [
        Target(f"onnx-{key[5:]}/onnxruntime", f"ONNX {key[5:]}, ONNX Runtime", "onnx", path)
        for key, path in sorted(out.items())
        if key.startswith("onnx_")
    ]
    return run, skipped


def _decode(spec: dict) -> dict:
    import torch

    ids, n = spec["prompt_ids"], spec["tokens"]
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if spec["kind"] == "onnx":
        from ..export.onnx import OnnxCausalLM

        lm = OnnxCausalLM(spec["path"])

        def timed(count: int) -> tuple[float, float, int]:
            t0 = time.perf_counter()
            stream = lm.stream(ids, count)
            next(stream)
            first = time.perf_counter() - t0
            got = 1 + sum(1 for _ in stream)
            return first, time.perf_counter() - t0, got
    elif spec["kind"] == "engine":
        from ..engine import Engine

        engine = Engine.from_pretrained(spec["path"], max_len=len(ids) + n + 8, **spec["options"])

        def timed(count: int) -> tuple[float, float, int]:
            got = engine.generate_timed(ids, count)
            return got["ttft_s"], got["total_s"], len(got["tokens"])
    else:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(spec["path"], dtype=torch.bfloat16 if cuda else torch.float32)
        model = model.to("cuda" if cuda else "cpu").eval()
        prompt = torch.tensor([ids], device=model.device)

        @torch.no_grad()
        def timed(count: int) -> tuple[float, float, int]:
            sync()
            t0 = time.perf_counter()
            model.generate(prompt, max_new_tokens=1, do_sample=False)
            sync()
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            got = model.generate(prompt, max_new_tokens=count, min_new_tokens=count, do_sample=False)
            sync()
            return first, time.perf_counter() - t0, got.shape[1] - len(ids)

    timed(min(n, 8) if spec["kind"] != "engine" else n)  # the engine compiles for its step, not the length
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    first, total, got = timed(n)
    out = {"tokens": got, "ttft_s": first, "total_s": total, "ms_per_token": 1000 * total / got}
    if cuda:
        out.update(
            peak_allocated_gib=torch.cuda.max_memory_allocated() / 2**30,
            peak_reserved_gib=torch.cuda.max_memory_reserved() / 2**30,
        )
    return out


if __name__ == "__main__":
    print(json.dumps(_decode(json.loads(sys.argv[1]))), flush=True)
