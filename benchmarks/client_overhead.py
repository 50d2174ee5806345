"""What ferrylm's launcher and client add on top of bare vLLM (CPU build, SmolLM2), on loopback.

    .venv/bin/python benchmarks/client_overhead.py --out client_overhead_cpu.json

One machine's run-to-run spread (±10 % between single 512-token requests here) hides a 5 % effect,
so the clients are compared inside one server, interleaved: each round sends the same greedy
streaming request (ignore_eos, `--new-tokens`) once through each client, rotating their order, and
the overhead is the median over rounds of each client's time over the bare client's time.

- bare: `requests` posting the JSON and reading the SSE lines, nothing parsed (the floor);
- ferrylm: `ferrylm.serve.client.timed_chat_stream` (what `ferrylm chat` and the eval stage use);
- openai: the OpenAI Python SDK's streaming chat call.

The launcher is compared the same way across two servers started one after the other on the
same model: vLLM's own command line started by hand (`subprocess`, the arguments ferrylm would
pass) against `ferrylm.serve.server_for(...).start()`, each timed with the bare client.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]


def bare(url: str, messages: list[dict], n: int) -> float:
    t0 = time.perf_counter()
    payload = {
        "model": "ferrylm",
        "messages": messages,
        "max_tokens": n,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    with requests.post(f"{url}/v1/chat/completions", json=payload, stream=True, timeout=600) as r:
        for _ in r.iter_lines():
            pass
    return time.perf_counter() - t0


def ferrylm_client(url: str, messages: list[dict], n: int) -> float:
    from ferrylm.serve.client import timed_chat_stream

    t = timed_chat_stream(url, "ferrylm", messages, n)
    assert t.completion_tokens == n, t
    return t.total_s


def openai_sdk(url: str, messages: list[dict], n: int) -> float:
    from openai import OpenAI

    t0 = time.perf_counter()
    for _ in OpenAI(base_url=f"{url}/v1", api_key="none").chat.completions.create(
        model="ferrylm", messages=messages, max_tokens=n, temperature=0, stream=True, extra_body={"ignore_eos": True}
    ):
        pass
    return time.perf_counter() - t0


def rounds(url: str, clients: dict, messages: list[dict], n: int, count: int) -> dict:
    names = list(clients)
    times = {k: [] for k in names}
    for i in range(count):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            times[name].append(clients[name](url, messages, n))
    return times


def ratios(times: dict, base: str) -> dict:
    return {
        k: {
            "median_s": statistics.median(v),
            "runs_s": v,
            "median_ratio_to_bare": statistics.median(a / b for a, b in zip(v, times[base])),
        }
        for k, v in times.items()
    }


def main() -> None:
    from ferrylm.config import load_config
    from ferrylm.eval.latency import LATENCY_PROMPT
    from ferrylm.prompts import user_message
    from ferrylm.serve import free_port, server_for

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(REPO / ".cache" / "ferrylm" / "SmolLM2-135M-Instruct"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    messages = [{"role": "user", "content": user_message(LATENCY_PROMPT)}]
    cfg = load_config("default", ["run_dir=/tmp/ferrylm-client-overhead"])
    result = {"command": " ".join(sys.argv), "model": args.model, "new_tokens": args.new_tokens, "rounds": args.rounds}

    # 1. Launcher: bare vLLM command line, then ferrylm's launcher, each measured with the bare client.
    port = free_port()
    server = server_for(cfg, args.model, port=port)
    log = open("/tmp/ferrylm-client-overhead-bare.log", "wb")
    t0 = time.perf_counter()
    proc = subprocess.Popen(server.command(), env=server.env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        while not _healthy(server.url):
            assert proc.poll() is None, "bare vLLM exited; see /tmp/ferrylm-client-overhead-bare.log"
            time.sleep(1)
        result["bare_launch_startup_s"] = time.perf_counter() - t0
        result["bare_launch"] = rounds(server.url, {"bare": bare}, messages, args.new_tokens, args.rounds)["bare"]
    finally:
        proc.terminate()
        proc.wait(120)
    t0 = time.perf_counter()
    with server_for(cfg, args.model, port=free_port()) as managed:
        result["ferrylm_launch_startup_s"] = time.perf_counter() - t0
        # 2. Clients, interleaved on the launcher's server.
        times = rounds(
            managed.url,
            {"bare": bare, "ferrylm": ferrylm_client, "openai": openai_sdk},
            messages,
            args.new_tokens,
            args.rounds,
        )
    result["ferrylm_launch"] = times["bare"]
    result["clients"] = ratios(times, "bare")
    result["launcher_ratio_median"] = statistics.median(result["ferrylm_launch"]) / statistics.median(
        result["bare_launch"]
    )
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


def _healthy(url: str) -> bool:
    try:
        return requests.get(f"{url}/health", timeout=5).status_code == 200
    except requests.RequestException:
        return False


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
