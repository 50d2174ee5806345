"""vLLM (CPU build) behind `ferrylm serve`'s launcher, on loopback: bad-input load, hang-ups, latency.

    .venv/bin/python benchmarks/serve_load.py --model .cache/ferrylm/SmolLM2-135M-Instruct

1. 1,000 requests at concurrency 16, 20 % malformed (six kinds in turn): status codes by kind.
2. 8 clients hang up mid-stream: seconds until no request runs; server RSS before and after.
3. 512 new tokens (ignore_eos) at concurrency 1, 4, 16: TTFT, time per output token, total, and
   aggregate tokens/s, through ferrylm's client; at concurrency 1 also through the OpenAI SDK
   (the client overhead check).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]


def group_rss_mb(pid: int) -> float:
    p = psutil.Process(pid)
    return sum(q.memory_info().rss for q in [p, *p.children(recursive=True)]) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(REPO / ".cache" / "ferrylm" / "SmolLM2-135M-Instruct"))
    ap.add_argument("--port", type=int, default=8431)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--new-tokens", type=int, default=512)
    args = ap.parse_args()

    from ferrylm.bench import load
    from ferrylm.config import load_config
    from ferrylm.eval.latency import LATENCY_PROMPT
    from ferrylm.prompts import user_message
    from ferrylm.serve import server_for
    from ferrylm.serve.client import timed_chat_stream

    cfg = load_config("default", [f"serve.port={args.port}", "run_dir=/tmp/ferrylm-serve-bench"])
    result = {"command": " ".join(sys.argv), "model": args.model}
    t0 = time.perf_counter()
    server = server_for(cfg, args.model).start()
    result["startup_s"] = time.perf_counter() - t0
    url = server.url
    try:
        rss0 = group_rss_mb(server.proc.pid)
        result["bad_input_load"] = load.hammer(url, "ferrylm", args.requests, 16, 0.2)
        load.hang_up_mid_stream(url, "ferrylm", clients=8)
        result["idle_after_hangups_s"] = load.wait_idle(url, 120)
        result["rss_mb_before_after"] = [rss0, group_rss_mb(server.proc.pid)]
        messages = [{"role": "user", "content": user_message(LATENCY_PROMPT)}]
        result["latency"] = []
        for c in [int(x) for x in args.concurrency.split(",")]:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(c) as pool:
                runs = list(pool.map(lambda _: timed_chat_stream(url, "ferrylm", messages, args.new_tokens), range(c)))
            wall = time.perf_counter() - t0
            result["latency"].append(
                {
                    "concurrency": c,
                    "ttft_s": statistics.median(r.ttft_s for r in runs),
                    "tpot_ms": statistics.median(1000 / r.tokens_per_s for r in runs if r.tokens_per_s),
                    "total_s": statistics.median(r.total_s for r in runs),
                    "aggregate_tokens_per_s": sum(r.completion_tokens for r in runs) / wall,
                }
            )
        from openai import OpenAI

        sdk = OpenAI(base_url=f"{url}/v1", api_key="none")
        t0 = time.perf_counter()
        stream = sdk.chat.completions.create(
            model="ferrylm",
            messages=messages,
            max_tokens=args.new_tokens,
            temperature=0,
            stream=True,
            extra_body={"ignore_eos": True},
        )
        first = None
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - t0
        result["openai_sdk_concurrency_1"] = {"ttft_s": first, "total_s": time.perf_counter() - t0}
    finally:
        t0 = time.perf_counter()
        server.stop()
        result["stop_s"] = time.perf_counter() - t0
    out = REPO / "bench" / "results" / "serve_load_cpu.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
