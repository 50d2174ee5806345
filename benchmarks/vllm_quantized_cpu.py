"""vLLM (its CPU build) serving the export stage's compressed-tensors artifacts (W4A16, FP8).

    .venv/bin/python benchmarks/vllm_quantized_cpu.py --run runs/default --out vllm_quantized_cpu.json

Writes each artifact from the run's merged model with the export stage's own writer, starts vLLM's
OpenAI server on it (loopback), and compares vLLM's greedy tokens for the run's held-out prompts
with (a) the same artifact read by transformers' compressed-tensors loader (the export's parity
reader) and (b) the merged bf16 model. Also records start-up time, the kernel vLLM chose, and the
512-token latency of one request.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from pathlib import Path

import requests
import torch


def greedy_transformers(model, prompts: list[list[int]], n: int) -> list[list[int]]:
    outs = []
    with torch.no_grad():
        for ids in prompts:
            x = torch.tensor([ids])
            outs.append(
                model.generate(
                    x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n, do_sample=False
                )[0, len(ids) :].tolist()
            )
    return outs


def agreement(a: list[list[int]], b: list[list[int]]) -> dict:
    same = sum(x == y for p, q in zip(a, b) for x, y in zip(p, q))
    return {"token_agreement": same / sum(len(p) for p in a), "prompts_identical": sum(p == q for p, q in zip(a, b))}


def main() -> None:
    from transformers import AutoModelForCausalLM

    from ferrylm.export.vllm_quant import load_compressed, write_compressed
    from ferrylm.manifest import read_jsonl
    from ferrylm.models import load_tokenizer
    from ferrylm.prompts import user_message
    from ferrylm.serve import VllmServer, free_port

    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="runs/default")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kinds", default="w4a16,fp8")
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--work", default="/var/tmp/ferrylm-vllm-quantized")
    args = ap.parse_args()
    run = Path(args.run)
    merged = run / "export" / "merged"
    tok = load_tokenizer(merged)
    rows = read_jsonl(run / "data" / "eval.jsonl", args.prompts)
    # Held-out rows carry their chat messages (older runs: the prompt code only).
    messages = [
        r.get("messages") or [{"role": "user", "content": user_message(r["prompt_code"], "python")}] for r in rows
    ]
    prompts = [
        tok(tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False), add_special_tokens=False)[
            "input_ids"
        ]
        for m in messages
    ]
    n = args.new_tokens
    merged_tokens = greedy_transformers(AutoModelForCausalLM.from_pretrained(merged, dtype=torch.bfloat16), prompts, n)
    result = {
        "run": str(run),
        "prompts": len(prompts),
        "new_tokens": n,
        "torch_threads": torch.get_num_threads(),
        "artifacts": {},
    }
    for kind in args.kinds.split(","):
        art = Path(args.work) / kind
        shutil.rmtree(art, ignore_errors=True)
        info = write_compressed(merged, art, kind, args.group_size)
        tok.save_pretrained(art)
        hf_tokens = greedy_transformers(load_compressed(art), prompts, n)
        rec = {"write": info, "bytes": sum(p.stat().st_size for p in art.glob("*.safetensors"))}
        log = Path(args.work) / f"vllm-{kind}.log"
        server = VllmServer(art, "q", "127.0.0.1", free_port("127.0.0.1"), "bfloat16", 2048, 1, log, 1800)
        t0 = time.perf_counter()
        try:
            with server:
                rec["startup_s"] = time.perf_counter() - t0
                vllm_tokens = []
                for ids in prompts:
                    body = requests.post(
                        f"{server.url}/v1/completions",
                        timeout=600,
                        json={
                            "model": "q",
                            "prompt": ids,
                            "max_tokens": n,
                            "min_tokens": n,
                            "temperature": 0,
                            "return_token_ids": True,
                        },
                    ).json()
                    vllm_tokens.append(body["choices"][0]["token_ids"])
                t1 = time.perf_counter()
                requests.post(
                    f"{server.url}/v1/completions",
                    timeout=900,
                    json={
                        "model": "q",
                        "prompt": "def fibonacci(n):",
                        "max_tokens": 512,
                        "ignore_eos": True,
                        "temperature": 0,
                    },
                )
                rec["latency_512_s"] = time.perf_counter() - t1
        except Exception as err:  # the record says what failed; the other kind still runs
            rec["error"] = f"{type(err).__name__}: {err}"
            vllm_tokens = None
        text = log.read_text(errors="replace") if log.is_file() else ""
        rec["vllm_kernels"] = sorted({a or b for a, b in re.findall(r"Using (\w+) for|Selected (\w+) for", text)})
        if vllm_tokens:
            rec["vllm_vs_transformers_same_artifact"] = agreement(vllm_tokens, hf_tokens)
            rec["vllm_vs_merged_bf16"] = agreement(vllm_tokens, merged_tokens)
        rec["transformers_artifact_vs_merged_bf16"] = agreement(hf_tokens, merged_tokens)
        result["artifacts"][kind] = rec
        print(json.dumps({kind: rec}, indent=2), flush=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
