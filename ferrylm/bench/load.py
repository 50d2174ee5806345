"""Load with bad input against an OpenAI-compatible endpoint on loopback: valid chat requests mixed with
malformed ones, and clients that hang up mid-stream. Used by the end-to-end test and benchmarks/serve_load.py.
And a concurrency sweep's bookkeeping (`sweep`, `summarize`): studies/serving_a_team/serve_team.py on a GPU.

Every malformed kind must get a 4xx with a message, nothing may get a 5xx, and the server must
answer /health afterwards with no request left running.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import requests

from ..serve.stage import LOOPBACK


def _malformed(model: str, long_prompt: str) -> dict[str, tuple[str, dict | str]]:
    """kind → (path, JSON payload or raw body)."""
    chat = "/v1/chat/completions"
    msgs = [{"role": "user", "content": "hi"}]
    return {
        "bad_json": (chat, '{"model": "' + model + '", "messages": [ {"role": '),
        "negative_max_tokens": (chat, {"model": model, "messages": msgs, "max_tokens": -5}),
        "huge_max_tokens": (chat, {"model": model, "messages": msgs, "max_tokens": 10**9}),
        "over_long_prompt": ("/v1/completions", {"model": model, "prompt": long_prompt, "max_tokens": 4}),
        "unknown_model": (chat, {"model": "no-such-model", "messages": msgs, "max_tokens": 4}),
        "wrong_types": (chat, {"model": model, "messages": "hi", "max_tokens": "four", "temperature": "hot"}),
    }


def _send(url: str, path: str, body, timeout: float) -> tuple[int, str]:
    try:
        if isinstance(body, str):
            r = requests.post(url + path, data=body, headers={"Content-Type": "application/json"}, timeout=timeout)
        else:
            r = requests.post(url + path, json=body, timeout=timeout)
        return r.status_code, r.text[:500]
    except requests.RequestException as e:
        return -1, str(e)[:500]


def hammer(
    url: str,
    model: str,
    total: int,
    concurrency: int,
    malformed_fraction: float = 0.2,
    max_tokens: int = 4,
    max_model_len: int = 2048,
    timeout: float = 300,
) -> dict:
    """Send `total` requests, every 1/malformed_fraction-th one malformed (kinds in turn)."""
    if urlparse(url).hostname not in LOOPBACK:
        raise ValueError(f"{url}: load is only ever sent to loopback")
    bad = _malformed(model, "word " * (max_model_len + 200))
    kinds = list(bad)
    every = max(1, round(1 / malformed_fraction)) if malformed_fraction > 0 else total + 1
    plan = []
    for i in range(total):
        if (i + 1) % every == 0:
            kind = kinds[(i // every) % len(kinds)]
            plan.append((kind, *bad[kind]))
        else:
            plan.append(
                (
                    "valid",
                    "/v1/chat/completions",
                    {
                        "model": model,
                        "max_tokens": max_tokens,
                        "temperature": 0,
                        "messages": [{"role": "user", "content": f"Count to {i % 7 + 2}."}],
                    },
                )
            )
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda p: (p[0], *_send(url, p[1], p[2], timeout)), plan))
    elapsed = time.perf_counter() - t0
    statuses: dict[str, Counter] = defaultdict(Counter)
    unexplained = []
    for kind, status, text in results:
        statuses[kind][status] += 1
        if kind != "valid" and 400 <= status < 500 and not _has_message(text):
            unexplained.append(kind)
    return {
        "requests": total,
        "concurrency": concurrency,
        "elapsed_s": elapsed,
        "requests_per_s": total / elapsed,
        "statuses": {k: dict(v) for k, v in statuses.items()},
        "server_errors": sum(n for k, v in statuses.items() for s, n in v.items() if s >= 500 or s < 0),
        "malformed_not_4xx": sum(
            n for k, v in statuses.items() if k != "valid" for s, n in v.items() if not 400 <= s < 500
        ),
        "valid_not_200": sum(n for s, n in statuses.get("valid", {}).items() if s != 200),
        "4xx_without_message": len(unexplained),
    }


def _has_message(text: str) -> bool:
    try:
        body = json.loads(text)
    except ValueError:
        return bool(text.strip())
    err = body.get("error", body) if isinstance(body, dict) else body
    return isinstance(err, dict) and bool(err.get("message") or err.get("detail"))


def hang_up_mid_stream(url: str, model: str, clients: int = 4, max_tokens: int = 256) -> int:
    """Open streams, read a little of each, close the connections; returns the chunks read."""
    read = 0
    for _ in range(clients):
        r = requests.post(
            f"{url}/v1/chat/completions",
            stream=True,
            timeout=120,
            json={
                "model": model,
                "max_tokens": max_tokens,
                "stream": True,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": "Write a long story."}],
            },
        )
        for i, _line in enumerate(r.iter_lines()):
            read += 1
            if i >= 3:
                break
        r.close()
    return read


def running_requests(url: str) -> float:
    """vLLM's gauge of requests being processed now (from /metrics)."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    values = [float(m.group(1)) for m in re.finditer(r"^vllm:num_requests_running\{[^}]*\} ([0-9.e+-]+)$", text, re.M)]
    if not values:
        raise ValueError(f"{url}/metrics has no vllm:num_requests_running")
    return sum(values)


def wait_idle(url: str, timeout: float = 60) -> float:
    """Seconds until no request is running (raises after `timeout`)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if running_requests(url) == 0:
            return time.perf_counter() - t0
        time.sleep(0.5)
    raise TimeoutError(f"{url}: requests still running after {timeout} s")


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile `q` (0-100] of `values`: a value that was measured, never interpolated."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summarize(runs: list[dict], wall_s: float) -> dict:
    """A concurrency level's figures from its requests ({ttft_s, total_s, tokens} each, all sent at once) and
    the wall time from the first sent to the last done: aggregate tokens/s over that wall time, p50 and p99
    of time to first token and of total time."""
    out = {"requests": len(runs), "wall_s": wall_s, "aggregate_tokens_per_s": sum(r["tokens"] for r in runs) / wall_s}
    for key in ("ttft_s", "total_s"):
        values = [r[key] for r in runs]
        out[f"{key[:-2]}_p50_s"], out[f"{key[:-2]}_p99_s"] = percentile(values, 50), percentile(values, 99)
    return out


def sweep(request, levels: list[int]) -> list[dict]:
    """`request()` -> {ttft_s, total_s, tokens}, sent `c` at once for each c in `levels` (one level after the other)."""
    rows = []
    for c in levels:
        start = time.perf_counter()
        with ThreadPoolExecutor(c) as pool:
            runs = list(pool.map(lambda _: request(), range(c)))
        rows.append({"concurrency": c, **summarize(runs, time.perf_counter() - start)})
    return rows
