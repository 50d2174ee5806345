"""Which W4A16 keeps the fine-tuned model's Pass@1? Every variant of one merged model, against it, in one process.

    python studies/w4a16_choice/w4a16_variants.py --run RUN --out variants.json \
        --variants gptq:32:search:0 gptq:32:search:1 gptq:32:full:0 gptq:128:search:0 rtn:32 awq:32 [-- DOTTED=OVERRIDES ...]

RUN is a finished run (data, train, export with its merged model). Each variant is quantized from the merged
model by the export's own writer (`export.vllm_quantize=[w4a16]` with `export.w4a16_group_size`,
`export.w4a16_method`, `export.w4a16_clipping`, `export.calibration_seed`: METHOD:GROUP[:CLIPPING:SEED]),
then asked the eval's benchmarks (eval.benchmarks, all their tasks: the canary's too, since the merged model
and its artifacts share the checkpoint; own-code's where it is named, as the eval stage finds them or reads them
from the task cache) through the eval's in-process generator, as `eval.artifacts` asks one. Against the merged model on the same tasks: Pass@1, tasks lost and won, McNemar's p; and the mean
per-token KL(merged || artifact) on the run's held-out rows. Two seeds of one variant show the flips that
calibration alone gives. METHOD awq: AutoAWQ's activation-aware scales and clipping, then rounded by the export's
writer (needs the autoawq package; the GPU script's wheels carry it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from concurrent.futures import Future
from pathlib import Path

import torch
from common import keeps, run_tracks  # this folder's: the run's tracks, the shipping bar

from ferrylm.data.encode import load_rows
from ferrylm.eval.execution.queue import ExecutionQueue
from ferrylm.eval.generators import LocalGenerator
from ferrylm.eval.report.paired import compare
from ferrylm.eval.tasks import benchmark
from ferrylm.export.stage import _calibration_rows, _set_generation_eos
from ferrylm.export.vllm_quant import load_compressed, write_compressed
from ferrylm.manifest import read_record
from ferrylm.models import load_tokenizer


def parse(variant: str) -> dict:
    method, group, *rest = variant.split(":")
    clipping, seed = rest + ["search", "0"][len(rest) :]  # "gptq:32:full" takes seed 0
    return {"name": variant, "method": method, "group": int(group), "clipping": clipping, "seed": int(seed)}


def quantize(cfg, merged: Path, v: dict, out: Path) -> dict:
    """The export's writer on the merged model, with the export stage's calibration rows (seeded draw); "awq":
    rounded to nearest after AutoAWQ's activation-aware scales and clipping (awq_scaled)."""
    e = cfg.export.model_copy(update={"calibration_seed": v["seed"]})
    rows = _calibration_rows(cfg.model_copy(update={"export": e})) if v["method"] != "rtn" else None
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    if v["method"] == "awq":
        merged, rows = awq_scaled(merged, rows, v["group"], out.with_name(out.name + "-scaled")), None
    info = write_compressed(merged, out, "w4a16", v["group"], rows, v["clipping"])
    tokenizer = load_tokenizer(merged)  # as the export stage writes an artifact: tokenizer, end-of-turn stop
    tokenizer.save_pretrained(out)
    _set_generation_eos(out, tokenizer)
    return {**info, "seconds": round(time.perf_counter() - t0, 1)}


def awq_scaled(merged: Path, rows: list[list[int]], group: int, out: Path) -> Path:
    """The merged model with AutoAWQ's activation-aware scales folded in and its weights clipped, not rounded
    (export_compatible), symmetric as our grid is: the export's writer rounds it to its own format, so the engine
    serves it as it serves ours. AutoAWQ 0.2.9 resolves beside vLLM 0.32's pins (docs/notes/quantization.md)."""
    from awq import AutoAWQForCausalLM

    shutil.rmtree(out, ignore_errors=True)
    model, tokenizer = AutoAWQForCausalLM.from_pretrained(str(merged)), load_tokenizer(merged)
    how = {"zero_point": False, "q_group_size": group, "w_bit": 4, "version": "GEMM"}
    longest = max(map(len, rows))  # rows longer than this are skipped by AutoAWQ
    model.quantize(
        tokenizer,
        quant_config=how,
        calib_data=rows,
        max_calib_samples=len(rows),
        max_calib_seq_len=longest,
        export_compatible=True,
    )
    model.model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    del model
    torch.cuda.empty_cache()
    return out


def asked(cfg, model_dir: Path, tracks, out: Path, label: str, queue) -> dict:
    """{"benchmarks": the tracks' summaries}, standing as a future until the queue has executed the replies."""
    gen = LocalGenerator(model_dir)
    measured = {"benchmarks": benchmark.measure(gen, tracks, cfg.eval, out, label, None, queue.later)}
    del gen
    torch.cuda.empty_cache()
    return measured


def kl_on_rows(merged: Path, artifact: Path, rows: list[list[int]]) -> float:
    """Mean per-token KL(merged || artifact) over the held-out rows, both read by transformers."""
    from transformers import AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    ref = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.bfloat16).to(device).eval()
    got = load_compressed(artifact).to(device).eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for ids in rows:
            x = torch.tensor([ids], device=device)
            p = ref(x).logits[0].float().log_softmax(-1)
            q = got(x).logits[0].float().log_softmax(-1)
            total += (p.exp() * (p - q)).sum().item()
            tokens += len(ids)
    del ref, got
    torch.cuda.empty_cache()
    return total / max(tokens, 1)


def against(merged: list[dict], variant: list[dict]) -> dict:
    """Per track (the benchmarks' summaries of each): the variant's passes, lost and won against the merged model, McNemar's p."""
    out = {}
    for m, v in zip(merged, variant):
        c = compare(v["per_task"], m["per_task"])
        row = {
            "tasks": c["tasks"],
            "merged": round(c["b"] * c["tasks"]),
            "artifact": round(c["a"] * c["tasks"]),
            "won": c.get("only_a"),
            "lost": c.get("only_b"),
            "p": c.get("p"),
        }
        out[m["key"]] = row | {"keeps": keeps(row)}
    return out


def merged_from(tracks, path: str) -> list[dict]:
    """The merged model's summaries from an earlier sweep of the same run (execute_replies.py --passed), so its
    generation is skipped; the same tasks or a clear error. (The sweep's merged model and issue 81's eval of it, two
    runs on H200s, passed within one task of each other on every own-code track: docs/notes/quantization.md.)"""
    kept, out = json.loads(Path(path).read_text()), []
    for t in tracks:
        head = {"benchmark": t.benchmark, "language": t.language, "title": t.title, "key": t.key}
        ids = [p["task_id"] for p in t.problems]
        if t.not_measured is not None or not ids:
            out.append({**head, "not_measured": t.not_measured or "no tasks"})
            continue
        stem = benchmark.results_file(t.benchmark, t.language, "merged").removesuffix(".jsonl")
        col = kept.get(stem)
        if col is None or col["tasks"] != len(ids) or not set(col["passed"]) <= set(ids):
            raise SystemExit(f"--merged-passed {path}: {stem} does not hold this run's {len(ids)} tasks")
        passed = set(col["passed"])
        out.append({**head, "passed_samples": len(passed), "per_task": {i: float(i in passed) for i in ids}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--preset", default="demo-gpu")
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--kl-rows", type=int, default=32)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--merged-passed", help="an earlier sweep's passed.json: the merged model's column, not asked again"
    )
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    cfg, data, tracks = run_tracks(a.preset, a.run, a.overrides)
    merged = Path(read_record(cfg.stage_dir("export"))["outputs"]["merged"])
    rows = load_rows(data["outputs"]["eval"])
    held = [list(rows[i]["input_ids"])[:512] for i in range(min(a.kl_rows, len(rows)))]
    work = Path(a.run) / "w4a16_variants"
    work.mkdir(parents=True, exist_ok=True)
    result = {"run": a.run, "merged": str(merged), "tracks": {t.key: len(t.problems) for t in tracks}, "variants": {}}
    with ExecutionQueue.for_this_machine(cfg.eval.exec_workers) as queue:
        kept = a.merged_passed and {"benchmarks": merged_from(tracks, a.merged_passed)}
        measured = {"merged": kept or asked(cfg, merged, tracks, work, "merged", queue)}
        made = {}
        for spec in a.variants:
            v = parse(spec)
            art = work / spec.replace(":", "-")
            made[spec] = {**v, "export": quantize(cfg, merged, v, art), "kl": kl_on_rows(merged, art, held)}
            made[spec]["bytes"] = sum(f.stat().st_size for f in art.glob("*.safetensors"))
            measured[spec] = asked(cfg, art, tracks, work, spec.replace(":", "-"), queue)
            print(spec, made[spec]["export"].get("seconds"), "s, KL", round(made[spec]["kl"], 4), flush=True)
            written(a.out, result, made, measured)  # a machine taken back mid-run leaves what was measured
        queue.settle()
    written(a.out, result, made, measured)
    print(json.dumps({k: v.get("against_merged") for k, v in result["variants"].items()}, indent=1))


def written(out: str, result: dict, made: dict, measured: dict) -> None:
    """`result` with every variant made so far, compared with the merged model where both have been executed
    (a variant whose replies still run says "executing"), written to `out`."""
    done = {k: v["benchmarks"] for k, v in measured.items() if not isinstance(v["benchmarks"], Future)}
    done |= {k: v["benchmarks"].result() for k, v in measured.items() if k not in done and v["benchmarks"].done()}
    if "merged" in done:
        result["merged_pass"] = {t["key"]: t["passed_samples"] for t in done["merged"]}
    for spec, info in made.items():
        both = "merged" in done and spec in done
        result["variants"][spec] = {
            **info,
            "against_merged": against(done["merged"], done[spec]) if both else "executing",
        }
    Path(out).write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
