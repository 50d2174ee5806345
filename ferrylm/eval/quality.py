"""BLEU on held-out docstring→body pairs, and the 512-new-token latency, against a live endpoint."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sacrebleu

from ..data.render import extract_code, user_message
from ..serve.client import chat, timed_chat_stream

# A fixed prompt, so latency numbers compare across runs and models.
LATENCY_PROMPT = 'def fibonacci(n: int) -> list[int]:\n    """Return the first n Fibonacci numbers."""\n'


def held_out_pairs(eval_jsonl: str | Path, limit: int) -> list[dict]:
    rows = []
    with open(eval_jsonl) as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
            if len(rows) == limit:
                break
    return rows


def bleu(base_url: str, model: str, pairs: list[dict], max_tokens: int, concurrency: int) -> dict:
    def one(row: dict) -> str:
        return extract_code(chat(base_url, model, [{"role": "user", "content": user_message(row["prompt_code"])}],
                                 max_tokens))

    with ThreadPoolExecutor(concurrency) as pool:
        hyps = list(pool.map(one, pairs))
    refs = [r["body"] for r in pairs]
    metric = sacrebleu.BLEU()  # default 13a tokenizer, exp smoothing
    score = metric.corpus_score(hyps, [refs])
    return {"sacrebleu": score.score, "bleu_0_1": score.score / 100, "signature": str(metric.get_signature()),
            "pairs": len(pairs)}


def latency(base_url: str, model: str, new_tokens: int) -> dict:
    messages = [{"role": "user", "content": user_message(LATENCY_PROMPT)}]
    timed_chat_stream(base_url, model, messages, 8)  # warm-up: the first request pays one-off costs
    t = timed_chat_stream(base_url, model, messages, new_tokens)
    return {"new_tokens": t.completion_tokens, "ttft_s": t.ttft_s, "total_s": t.total_s,
            "tokens_per_s": t.tokens_per_s}
