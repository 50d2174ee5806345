"""512 new tokens at batch 1 through a running `ferrylm serve` endpoint (vLLM's OpenAI API, or with
--triton a ferrylm Triton model), measured as the eval stage measures its latency
(`ferrylm.eval.latency.latency`: its prompt, greedy, ignore_eos, a short warm-up request, then --runs
timed ones; TTFT, total and time per token as p50 / p95 / mean).

    python3 benchmarks/endpoint_latency.py --url http://127.0.0.1:8311 --runs 3 --out latency.json
    python3 benchmarks/endpoint_latency.py --url http://127.0.0.1:8311 --triton --runs 3 --out latency.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    from ferrylm.eval.latency import latency
    from ferrylm.serve.client import timed_triton_stream

    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="ferrylm")
    ap.add_argument("--triton", action="store_true")
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    result = {
        "url": args.url,
        "backend": "triton" if args.triton else "vllm",
        **latency(args.url, args.model, args.new_tokens, args.runs, timed=timed_triton_stream if args.triton else None),
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
