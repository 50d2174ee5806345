"""vLLM's prefix caching and n-gram speculative decoding on the held-out prompts (docs/performance.md,
"Serving a team"): each variant started by ferrylm's launcher on the same model and asked the same questions,
greedy; a variant is worth keeping only when its replies equal the default's and it is faster.
    python studies/serving_a_team/serve_spec.py --model DIR --prompts P.jsonl --out R.json [--variants default,no-prefix,ngram]
P.jsonl comes from studies/serving_a_team/heldout_prompts.py. Each pass starts from an empty prefix cache (vLLM's dev-mode
/reset_prefix_cache), so a cached prefix is only one the pass itself wrote: the examples shown before every question.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
VARIANTS = {
    "default": (),  # as `ferrylm serve serve.backend=vllm` starts it: vLLM's defaults, prefix caching on
    "no-prefix": ("--no-enable-prefix-caching",),
    "ngram": ("--speculative-config", json.dumps(NGRAM)),
}


def one_pass(url: str, prompts: list[list[dict]], max_tokens: int, concurrency: int) -> dict:
    from ferrylm.bench.load import percentile
    from ferrylm.serve.client import timed_chat_stream

    requests.post(f"{url}/reset_prefix_cache", timeout=60).raise_for_status()
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        runs = list(pool.map(lambda m: timed_chat_stream(url, "ferrylm", m, max_tokens, ignore_eos=False), prompts))
    wall = time.perf_counter() - start
    tokens = sum(r.completion_tokens for r in runs)
    return {
        "concurrency": concurrency,
        "wall_s": wall,
        "tokens": tokens,
        "tokens_per_s": tokens / wall,
        "ttft_p50_s": statistics.median(r.ttft_s for r in runs),
        "ttft_p99_s": percentile([r.ttft_s for r in runs], 99),
        "replies": [r.text for r in runs],
    }


def variant(model: str, extra: tuple[str, ...], prompts: list[dict], max_tokens: int, log: Path) -> dict:
    from ferrylm.serve import free_port
    from ferrylm.serve.vllm_server import Parallel, VllmServer

    server = VllmServer(
        model, "ferrylm", "127.0.0.1", free_port(), "bfloat16", 4096, 4, log, 1800,
        parallel=Parallel(gpu_memory_utilization=0.85, extra_args=extra),
    )  # fmt: skip
    start = time.perf_counter()
    with server:
        out = {"ready_s": time.perf_counter() - start}
        one_pass(server.url, [prompts[0]["messages"]] * 2, max_tokens, 1)  # lazy set-up, outside the timing
        for name, key, c in (("asked", "messages", 1), ("shown", "shown", 1), ("shown_x8", "shown", 8)):
            out[name] = one_pass(server.url, [p[key] for p in prompts], max_tokens, c)
            print(name, {k: v for k, v in out[name].items() if k != "replies"}, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", default="default,no-prefix,ngram")
    ap.add_argument("--n", type=int, default=48, help="prompts used, the file's first n")
    ap.add_argument("--max-tokens", type=int, default=256)
    a = ap.parse_args()
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # for /reset_prefix_cache between passes
    prompts = [json.loads(line) for line in Path(a.prompts).read_text().splitlines() if line.strip()][: a.n]
    out = Path(a.out)
    result = {"model": a.model, "prompts": len(prompts), "max_tokens": a.max_tokens, "ngram": NGRAM, "variants": {}}
    for name in a.variants.split(","):
        print("variant", name, flush=True)
        got = variant(a.model, VARIANTS[name], prompts, a.max_tokens, out.with_suffix(f".{name}.log"))
        base = result["variants"].get("default")
        for key in ("asked", "shown", "shown_x8"):
            if base:  # replies equal to the default's, prompt by prompt
                got[key]["same_as_default"] = sum(x == y for x, y in zip(got[key]["replies"], base[key]["replies"]))
        result["variants"][name] = got
        out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
