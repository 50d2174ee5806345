"""512 new tokens at batch 1 through a running `ferrylm serve` endpoint (vLLM's OpenAI API, or with
--triton a ferrylm Triton model): the eval stage's latency prompt, greedy, ignore_eos, one untimed
request first, then --runs timed ones (medians of TTFT and total).

    python3 bench/endpoint_latency.py --url http://127.0.0.1:8311 --runs 3 --out latency.json
    python3 bench/endpoint_latency.py --url http://127.0.0.1:8311 --triton --runs 3 --out latency.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from ferrylm.data.render import user_message
    from ferrylm.eval.quality import LATENCY_PROMPT
    from ferrylm.serve.client import timed_chat_stream, timed_triton_stream

    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="ferrylm")
    ap.add_argument("--triton", action="store_true")
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    timed = timed_triton_stream if args.triton else timed_chat_stream
    messages = [{"role": "user", "content": user_message(LATENCY_PROMPT)}]
    runs = [timed(args.url, args.model, messages, args.new_tokens) for _ in range(args.runs + 1)][1:]
    result = {"url": args.url, "backend": "triton" if args.triton else "vllm", "new_tokens": args.new_tokens,
              "completion_tokens": [r.completion_tokens for r in runs],
              "ttft_s": statistics.median(r.ttft_s for r in runs), "total_s": statistics.median(r.total_s for r in runs),
              "runs_total_s": [r.total_s for r in runs]}
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
