"""A team's load on one GPU: the engine alone, the same engine behind `ferrylm serve serve.backend=triton`,
vLLM as the peer, and transformers' generate(), on one model (the Qwen2.5-7B shape of benchmarks/make_qwen7b_shape.py).

    XDG_CACHE_HOME=/tmp/fcache python3 studies/serving_a_team/serve_team.py --model /tmp/q7w4 --w4a16 --out /tmp/res/team_w4a16.json
    XDG_CACHE_HOME=/tmp/fcache python3 studies/serving_a_team/serve_team.py --model /tmp/q7 --generate --out /tmp/res/team_bf16.json
    python3 studies/serving_a_team/serve_team.py --model /tmp/q7w4 --w4a16 --steps vllm --out /tmp/res/vllm_w4a16.json

1. The engine alone, on a machine that has never tuned (the cache under XDG_CACHE_HOME empty): its start-up
   by phase, then 512 new tokens three times read without a host sync per token (`generate_timed`: the
   floor) and as the server reads them (`stream`), with their tokens compared.
2. Triton (the repository `ferrylm export` writes, started as `ferrylm serve` starts it), with the tuning
   the first step saved: time to ready and its phases, 512 tokens three times through the HTTP client,
   then 1, 8, 32 and 64 streams at once (the queue bound raised to the largest level).
3. The choices the first step saved, shipped (engine/tuning/defaults/<gpu>.json of this checkout) and the cache
   emptied: a fresh server's time to ready, its phases and 512 tokens, under `serve.tune_budget_s`'s default.
   The file is copied to the output's folder for the repository.
4. With --generate, transformers' generate() on the same weights at batch 1, 8, 32 and 64 (the prompt
   repeated): the whole batch's time, its first token's (a 1-token generate), aggregate tokens/s.
5. With --vllm, the peer: vLLM's OpenAI server started as `ferrylm serve serve.backend=vllm` starts it (its
   defaults: prefix caching on, CUDA graphs), time to ready, 512 tokens three times, then the same sweep.
--steps picks which of engine (1), triton (2, 3) and vllm (5) run, in that order.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import time
from pathlib import Path

MESSAGES = [
    {"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number, with a docstring."}
]


def _save(out: Path, result: dict) -> None:
    out.write_text(json.dumps(result, indent=1))  # after each step: what ran is kept if a later step fails


def engine_alone(model_dir: str, w4a16: bool, runs: int, new_tokens: int) -> dict:
    import torch
    from transformers import AutoTokenizer

    from ferrylm.engine import Engine

    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok(tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False), add_special_tokens=False)[
        "input_ids"
    ]
    engine = Engine.from_pretrained(
        model_dir, dtype=torch.bfloat16, max_len=2048, fused=True, w4a16_dir=model_dir if w4a16 else None, gemv=True
    )
    engine.warm_up(ids)
    timed = [engine.generate_timed(ids, new_tokens) for _ in range(runs)]
    streamed = []
    for _ in range(runs):
        start, first, tokens = time.perf_counter(), None, []
        for t in engine.stream(ids, new_tokens):
            first = first or time.perf_counter()
            tokens.append(t)
        streamed.append({"ttft_s": first - start, "total_s": time.perf_counter() - start, "tokens": tokens})
    result = {
        "prompt_tokens": len(ids),
        "phases_s": engine.phases,
        "tuned_file": str(engine.tuned_file),
        "generate_timed_s": [r["total_s"] for r in timed],
        "stream_s": [r["total_s"] for r in streamed],
        "generate_timed_p50_s": statistics.median(r["total_s"] for r in timed),
        "stream_p50_s": statistics.median(r["total_s"] for r in streamed),
        "stream_ttft_p50_s": statistics.median(r["ttft_s"] for r in streamed),
        "stream_tokens_equal_generate_timed": all(r["tokens"] == timed[0]["tokens"] for r in streamed),
    }
    del engine
    torch.cuda.empty_cache()
    return result


def served(
    repo: Path, name: str, runs: int, new_tokens: int, levels: list[int], log: Path, tune_budget_s: float | None
) -> dict:
    from ferrylm.bench.load import sweep
    from ferrylm.models import cache_root
    from ferrylm.serve import TritonServer, free_port
    from ferrylm.serve.client import timed_triton_stream

    server = TritonServer(
        repo,
        name,
        "127.0.0.1",
        free_port(count=3),
        log,
        1800,
        30,
        cache_root(),
        max_queue=max(levels, default=16),
        tune_budget_s=tune_budget_s,
    )
    log_from = log.stat().st_size if log.exists() else 0
    start = time.perf_counter()
    with server:
        ready_s = time.perf_counter() - start
        text = log.read_text(errors="replace")[log_from:]
        phases = {m[1]: float(m[2]) for m in re.finditer(r"^ferrylm: engine (\w+) ([\d.]+) s$", text, re.M)}

        def request() -> dict:
            t = timed_triton_stream(server.url, name, MESSAGES, new_tokens)
            return {"ttft_s": t.ttft_s, "total_s": t.total_s, "tokens": t.completion_tokens}

        single = [request() for _ in range(runs)]
        rows = sweep(request, levels)
    return {
        "ready_s": ready_s,
        "phases_s": phases,
        "total_s": [r["total_s"] for r in single],
        "total_p50_s": statistics.median(r["total_s"] for r in single),
        "ttft_p50_s": statistics.median(r["ttft_s"] for r in single),
        "sweep": rows,
    }


def served_vllm(model_dir: str, runs: int, new_tokens: int, levels: list[int], log: Path) -> dict:
    from ferrylm.bench.load import sweep
    from ferrylm.serve import free_port
    from ferrylm.serve.client import timed_chat_stream
    from ferrylm.serve.vllm_server import Parallel, VllmServer

    server = VllmServer(
        model_dir,
        "ferrylm",
        "127.0.0.1",
        free_port(),
        "bfloat16",
        2048,
        4,
        log,
        1800,
        parallel=Parallel(gpu_memory_utilization=0.9),
    )
    start = time.perf_counter()
    with server:
        ready_s = time.perf_counter() - start

        def request() -> dict:
            t = timed_chat_stream(server.url, "ferrylm", MESSAGES, new_tokens)
            return {"ttft_s": t.ttft_s, "total_s": t.total_s, "tokens": t.completion_tokens}

        request()  # the first request after ready pays for lazy set-up the later ones do not
        single = [request() for _ in range(runs)]
        rows = sweep(request, levels)
    return {
        "ready_s": ready_s,
        "total_s": [r["total_s"] for r in single],
        "total_p50_s": statistics.median(r["total_s"] for r in single),
        "ttft_p50_s": statistics.median(r["ttft_s"] for r in single),
        "sweep": rows,
    }


def generate_baseline(model_dir: str, new_tokens: int, levels: list[int]) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).cuda().eval()
    prompt = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    rows = []
    for c in levels:
        batch = tok([prompt] * c, return_tensors="pt", add_special_tokens=False).to("cuda")

        def run(n: int) -> float:
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.no_grad():
                model.generate(
                    **batch,
                    max_new_tokens=n,
                    min_new_tokens=n,
                    do_sample=False,
                    pad_token_id=tok.pad_token_id or tok.eos_token_id,
                )
            torch.cuda.synchronize()
            return time.perf_counter() - start

        run(2)  # warm-up
        ttft, total = run(1), run(new_tokens)
        rows.append(
            {"concurrency": c, "ttft_s": ttft, "total_s": total, "aggregate_tokens_per_s": c * new_tokens / total}
        )
        print("generate()", json.dumps(rows[-1]), flush=True)
    return rows


def triton_steps(a, result: dict, levels: list[int], work: Path) -> None:
    """Steps 2 and 3: Triton with the tuning step 1 saved, then with it shipped and the cache emptied."""
    import torch

    from ferrylm.config import load_config
    from ferrylm.engine.tuning.cache import DEFAULTS, gpu_slug
    from ferrylm.export.triton import write_triton_repo

    out = Path(a.out)
    repo = write_triton_repo(work / "triton_models", "ferrylm", a.model, engine="fused", w4a16=a.w4a16).parent
    result["served_tuned_cache"] = served(repo, "ferrylm", a.runs, a.new_tokens, levels, work / "triton.log", None)
    print("served", json.dumps(result["served_tuned_cache"]), flush=True)
    _save(out, result)
    tuned = Path(result["engine_alone"]["tuned_file"])
    shipped = DEFAULTS / f"{gpu_slug(torch.cuda.get_device_name())}.json"
    shipped.parent.mkdir(exist_ok=True)
    shipped.write_text(
        json.dumps([*json.loads(shipped.read_text()), *json.loads(tuned.read_text())], indent=1)
        if shipped.exists()
        else tuned.read_text()
    )
    shutil.copy(shipped, out.parent / shipped.name)
    shutil.rmtree(tuned.parent)  # a machine that has never tuned, with the choices shipped
    budget = load_config("default").serve.tune_budget_s
    result["served_shipped_defaults"] = served(repo, "ferrylm", a.runs, a.new_tokens, [], work / "triton.log", budget)
    print("served (shipped)", json.dumps(result["served_shipped_defaults"]), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--w4a16", action="store_true", help="--model is the export's W4A16 artifact")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--levels", default="1,8,32,64")
    ap.add_argument("--generate", action="store_true", help="also transformers' generate() at each level")
    ap.add_argument("--steps", default="engine,triton", help="of engine, triton (needs engine), vllm")
    a = ap.parse_args()
    import torch

    out, levels, steps = Path(a.out), [int(c) for c in a.levels.split(",") if c], a.steps.split(",")
    work = out.parent / f"{out.stem}-work"
    work.mkdir(parents=True, exist_ok=True)
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "model": a.model,
        "w4a16": a.w4a16,
        "new_tokens": a.new_tokens,
        "command": " ".join(__import__("sys").argv),
    }
    if "engine" in steps:
        result["engine_alone"] = engine_alone(a.model, a.w4a16, a.runs, a.new_tokens)
        print("engine alone", json.dumps(result["engine_alone"]), flush=True)
        _save(out, result)
    if "triton" in steps:
        triton_steps(a, result, levels, work)
        _save(out, result)
    if "vllm" in steps:
        result["vllm"] = served_vllm(a.model, a.runs, a.new_tokens, levels, work / "vllm.log")
        print("vllm", json.dumps(result["vllm"]), flush=True)
        _save(out, result)
    if a.generate:
        result["generate"] = generate_baseline(a.model, a.new_tokens, levels)
        _save(out, result)


if __name__ == "__main__":
    main()
