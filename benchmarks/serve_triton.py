"""512-token latency through Triton (the tritonserver bundled in nvidia-pytriton), on CPU or GPU, for the
Triton repositories `ferrylm export` writes: the merged model on ferrylm's fused engine (fp32 on a CPU,
bf16 on its matrix-vector kernel in CUDA graphs on a GPU) and on transformers' generate(), its ONNX
artifact (ONNX Runtime engine) and, with --w4a16, the W4A16 artifact on the fused engine. With
--in-process, the same engines measured in this process first, with no server: what Triton adds.

    .venv/bin/python benchmarks/serve_triton.py --merged runs/default/export/merged --work /var/tmp/ferrylm-triton --out serve_triton.json
    .venv/bin/python benchmarks/serve_triton.py ... --engines ferrylm-onnx --runs 1 --concurrency 4,16   # concurrency sweep
    .venv/bin/python benchmarks/serve_triton.py ... --engines ferrylm-fused,ferrylm-w4a16 --w4a16 <run>/export/vllm-w4a16
    python3 benchmarks/serve_triton.py ... --engines ferrylm-fused,ferrylm-w4a16 --w4a16 DIR --in-process --runs 3   # a GPU

The ONNX artifact is exported from --merged into --work if it is not there. Each request: the
demo's chat prompt, 512 new tokens (ignore_eos), greedy; TTFT = request sent → first text piece.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ferrylm.export.triton import write_triton_repo
from ferrylm.serve import TritonServer, free_port
from ferrylm.serve.client import triton_stream

CACHE = Path(".cache/ferrylm")
MESSAGES = [
    {"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number, with a docstring."}
]


def one_request(url: str, name: str, new_tokens: int) -> dict:
    start = time.perf_counter()
    first, pieces = None, 0
    for _piece in triton_stream(url, name, new_tokens, messages=MESSAGES, ignore_eos=True):
        first = first or time.perf_counter()
        pieces += 1
    end = time.perf_counter()
    return {"ttft_s": first - start, "total_s": end - start, "pieces": pieces}


def measure(repo: Path, name: str, runs: int, new_tokens: int, log: Path, concurrency: list[int]) -> dict:
    server = TritonServer(repo, name, "127.0.0.1", free_port(count=3), log, 600, 30, CACHE)
    t0 = time.perf_counter()
    with server:
        startup = time.perf_counter() - t0
        rows = [one_request(server.url, name, new_tokens) for _ in range(runs)]
        sweep = []
        for c in concurrency:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(c) as pool:
                rs = list(pool.map(lambda _: one_request(server.url, name, new_tokens), range(c)))
            wall = time.perf_counter() - t0
            sweep.append(
                {
                    "concurrency": c,
                    "wall_s": wall,
                    "ttft_p50_s": statistics.median(r["ttft_s"] for r in rs),
                    "ttft_max_s": max(r["ttft_s"] for r in rs),
                    "total_p50_s": statistics.median(r["total_s"] for r in rs),
                    "total_max_s": max(r["total_s"] for r in rs),
                    "aggregate_tokens_per_s": c * new_tokens / wall,
                }
            )
            print(name, json.dumps(sweep[-1]), flush=True)
    return {
        "startup_s": startup,
        "runs": rows,
        "total_p50_s": statistics.median(r["total_s"] for r in rows),
        "ttft_p50_s": statistics.median(r["ttft_s"] for r in rows),
        "tokens_per_s_p50": new_tokens / statistics.median(r["total_s"] for r in rows),
        "concurrency": sweep,
    }


def in_process(model_dir: str, w4a16: bool, runs: int, new_tokens: int) -> dict:
    """The engine the Triton model builds (the same arguments), driven directly, on the same prompt."""
    import torch
    from transformers import AutoTokenizer

    from ferrylm.engine import Engine

    cuda = torch.cuda.is_available()
    tok = AutoTokenizer.from_pretrained(model_dir)
    engine = Engine.from_pretrained(
        model_dir,
        dtype=torch.bfloat16 if cuda else torch.float32,
        max_len=2048,
        fused=True,
        w4a16_dir=model_dir if w4a16 else None,
        gemv=cuda,
    )
    ids = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    ids = tok(ids, add_special_tokens=False)["input_ids"]
    list(engine.stream(ids, 2))
    rows = []
    for _ in range(runs):
        start = time.perf_counter()
        first, n = None, 0
        for _tok in engine.stream(ids, new_tokens):
            first, n = first or time.perf_counter(), n + 1
        rows.append({"ttft_s": first - start, "total_s": time.perf_counter() - start, "tokens": n})
    del engine
    if cuda:
        torch.cuda.empty_cache()
    return {
        "runs": rows,
        "total_p50_s": statistics.median(r["total_s"] for r in rows),
        "ttft_p50_s": statistics.median(r["ttft_s"] for r in rows),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--merged", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--concurrency", default="", help="e.g. 4,16: that many requests at once, after the single runs")
    ap.add_argument("--engines", default="ferrylm,ferrylm-fused,ferrylm-onnx")
    ap.add_argument("--w4a16", help="a W4A16 artifact directory (export.vllm_quantize=[w4a16]) for ferrylm-w4a16")
    ap.add_argument("--in-process", action="store_true", help="also the fused engines driven directly, no server")
    a = ap.parse_args()
    work = Path(a.work)
    onnx_dir = work / "onnx-fp32"
    if "ferrylm-onnx" in a.engines.split(",") and not (onnx_dir / "model.onnx").is_file():
        from ferrylm.export.onnx import copy_tokenizer, export_onnx

        export_onnx(Path(a.merged), onnx_dir)
        copy_tokenizer(Path(a.merged), onnx_dir)
    repo = work / "triton_models"
    write_triton_repo(repo, "ferrylm", a.merged)
    write_triton_repo(repo, "ferrylm-fused", a.merged, engine="fused")
    if (onnx_dir / "model.onnx").is_file():
        write_triton_repo(repo, "ferrylm-onnx", onnx_dir, engine="onnx")
    if a.w4a16:
        write_triton_repo(repo, "ferrylm-w4a16", a.w4a16, engine="fused", w4a16=True)
    import torch

    results = {
        "threads": torch.get_num_threads(),
        "new_tokens": a.new_tokens,
        "engines": {},
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    }
    if a.in_process:
        results["in_process"] = {}
        for name, art, w4 in (("ferrylm-fused", a.merged, False), ("ferrylm-w4a16", a.w4a16, True)):
            if name in a.engines.split(",") and art:
                results["in_process"][name] = in_process(art, w4, a.runs, a.new_tokens)
                print(
                    "in-process",
                    name,
                    json.dumps({k: v for k, v in results["in_process"][name].items() if k != "runs"}),
                    flush=True,
                )
                Path(a.out).write_text(json.dumps(results, indent=1))  # kept if a server below cannot start
    concurrency = [int(c) for c in a.concurrency.split(",") if c]
    engines = (
        ("ferrylm", "transformers (merged, fp32 eager)"),
        ("ferrylm-fused", "ferrylm fused engine (merged)"),
        ("ferrylm-onnx", "ONNX Runtime (fp32, KV cache)"),
        ("ferrylm-w4a16", "ferrylm fused engine (W4A16 artifact)"),
    )
    for name, engine in engines:
        if name not in a.engines.split(","):
            continue
        results["engines"][engine] = measure(repo, name, a.runs, a.new_tokens, work / f"{name}.log", concurrency)
        print(engine, json.dumps({k: v for k, v in results["engines"][engine].items() if k != "runs"}), flush=True)
        Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
