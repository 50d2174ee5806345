"""`ferrylm train` on one or two GPUs with Qwen2.5-7B shapes: full fine-tune under ZeRO-2 / ZeRO-3,
LoRA on 1 and 2 GPUs. Tokens/s per GPU, MFU and peak memory per GPU against `ferrylm plan`.

    python3 bench/train_zero.py --work /tmp/ft --tokenizer TOKENIZER_DIR --out zero.json VARIANT [VARIANT ...]

Every variant is a real `ferrylm launch --nproc N` (or `ferrylm train` for one GPU) of a run config:
random bf16 weights with Qwen2.5-7B's shapes (bench/make_qwen7b_shape.py), rows of 4,096 real
tokens (the standard library's text, one example per row, so attention spans the whole row, as in
the anchors), micro-batch 1, no gradient accumulation. Tokens/s and MFU are the medians of the
Trainer's log lines after the first (the first holds start-up and the step-0 eval).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

SEQ = 4096
COMMON = ["train.per_device_batch_size=1", "train.gradient_accumulation_steps=1", "train.max_steps=8",
          "train.logging_steps=2", "train.save_steps=0", "train.warmup_steps=0", "train.eval_batches=1",
          "train.report_to=[]", "train.precision=bf16", f"data.max_seq_len={SEQ}"]
FULL = ["train.method=full", "train.learning_rate=1e-5"]
LORA = ["train.method=lora", "train.lora_r=16", "train.lora_alpha=32", "train.lora_dropout=0"]
VARIANTS = {
    # name: (GPUs, overrides)
    "zero2-full-ckpt": (2, FULL + ["train.deepspeed=zero2", "train.gradient_checkpointing=true"]),
    "zero2-full-liger-nockpt": (2, FULL + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"]),
    "zero2-full-liger-ckpt50": (2, FULL + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=true",
                                           "train.checkpoint_fraction=0.5"]),
    "zero2-full-liger-ckpt": (2, FULL + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=true"]),
    "zero3-full-ckpt": (2, FULL + ["train.deepspeed=zero3", "train.gradient_checkpointing=true"]),
    "zero3-full-liger-nockpt": (2, FULL + ["train.deepspeed=zero3", "train.liger=true", "train.gradient_checkpointing=false"]),
    "zero2-full-liger-nockpt-acc4": (2, FULL + ["train.deepspeed=zero2", "train.liger=true",
                                                "train.gradient_checkpointing=false", "train.gradient_accumulation_steps=4",
                                                "train.max_steps=6"]),
    # Planner check: HF kernels (the logits materialised), no checkpointing.
    "zero2-full-nockpt": (2, FULL + ["train.deepspeed=zero2", "train.gradient_checkpointing=false"]),
    # The LoRA anchor's recipe (HF + PEFT, checkpointing, no DeepSpeed) through ferrylm train.
    "lora-1gpu-hf-ckpt": (1, LORA + ["train.gradient_checkpointing=true"]),
    "lora-1gpu": (1, LORA + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"]),
    "lora-2gpu": (2, LORA + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"]),
}


def make_data(data_dir: Path, tokenizer_dir: str, rows: int = 96) -> None:
    """Rows of exactly SEQ tokens cut from the standard library's text, labels = inputs."""
    from transformers import AutoTokenizer

    from ferrylm.data.encode import ArrowRows

    if (data_dir / "train.arrow").is_file():
        return
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids: list[int] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        ids += tok(path.read_text(errors="replace"), add_special_tokens=False)["input_ids"]
        if len(ids) >= (rows + 8) * SEQ:
            break
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, start, count in (("train.arrow", 0, rows), ("eval.arrow", rows, 8)):
        w = ArrowRows(data_dir / name, ["input_ids", "labels"])
        for i in range(start, start + count):
            chunk = ids[i * SEQ:(i + 1) * SEQ]
            w.write({"input_ids": chunk, "labels": chunk})
        w.close()


def run_variant(name: str, work: Path, model_dir: Path) -> dict:
    gpus, overrides = VARIANTS[name]
    run = work / "runs" / name
    (run / "data").mkdir(parents=True, exist_ok=True)
    for f in ("train.arrow", "eval.arrow"):
        target = run / "data" / f
        if not target.exists():
            target.symlink_to(work / "data" / f)
    args = [f"run_dir={run}", f"model.path={model_dir}", *COMMON, *overrides]
    cmd = ([sys.executable, "-m", "ferrylm", "launch", "--nproc", str(gpus), *args] if gpus > 1
           else [sys.executable, "-m", "ferrylm", "train", *args])
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    row = {"variant": name, "gpus": gpus, "overrides": overrides, "wall_s": round(time.time() - t0, 1),
           "returncode": proc.returncode}
    history = run / "train" / "log_history.jsonl"
    lines = [json.loads(l) for l in history.read_text().splitlines()] if history.is_file() else []
    speed = [l for l in lines if "tokens_per_s" in l][1:]
    if speed:   # kept also when the run failed later (e.g. while saving)
        row.update(tokens_per_s_per_gpu=statistics.median(l["tokens_per_s"] for l in speed) / gpus,
                   mfu=statistics.median(l["mfu"] for l in speed),
                   peak_allocated_gib_rank0=max(l["gpu_memory_gib"] for l in speed),
                   losses=[l["loss"] for l in lines if "loss" in l and "eval_loss" not in l])
    if proc.returncode != 0:
        row["error"] = "\n".join(ln for ln in proc.stderr.splitlines() if "rank" in ln or "Error" in ln)[-2500:]
        return row
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    row.update(planned_allocated_gib=m["planned_peak_gib"], base_eval_loss=m["base_eval_loss"], eval_loss=m["eval_loss"],
               attention=m["attention"], record_peak_gib_rank0=m["peak_gpu_memory_gib"])
    # The saved model is 15 GB: drop it, the numbers are what this benchmark keeps.
    subprocess.run(["rm", "-rf", str(run / "train" / "model"), str(run / "train" / "adapter")])
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/ft")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("variants", nargs="+", choices=list(VARIANTS))
    a = ap.parse_args()
    work = Path(a.work)
    model_dir = work / "qwen7b"
    if not (model_dir / "config.json").is_file():
        subprocess.run([sys.executable, str(Path(__file__).parent / "make_qwen7b_shape.py"), str(model_dir), a.tokenizer],
                       check=True)
    make_data(work / "data", a.tokenizer)
    import torch

    results = {"device": torch.cuda.get_device_name(), "gpus_visible": torch.cuda.device_count(), "seq_len": SEQ,
               "rows": []}
    for name in a.variants:
        row = run_variant(name, work, model_dir)
        results["rows"].append(row)
        Path(a.out).write_text(json.dumps(results, indent=1))
        show = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items() if k not in ("overrides", "losses", "error")}
        print(json.dumps(show), flush=True)
        if "error" in row:
            print(row["error"], flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
