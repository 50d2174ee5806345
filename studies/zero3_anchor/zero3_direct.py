"""The anchor for `ferrylm bench`'s ZeRO-3 row: the same full fine-tune driven by DeepSpeed directly
(no Trainer, no ferrylm), launched with torchrun, so both can be measured in one run on one machine.

    torchrun --nproc_per_node 2 studies/zero3_anchor/zero3_direct.py --model DIR --out direct.json [--zero KEY=VALUE ...]

The recipe of ../shared's ZeRO-3 anchor: bf16 weights loaded under zero.Init, gradient checkpointing
(non-reentrant, as ferrylm sets it), SDPA, micro-batch 1, no accumulation, DeepSpeed's own AdamW
(FusedAdam on a GPU) at lr 1e-5, gradient clipping 1.0, and DeepSpeed's default ZeRO-3 settings
unless --zero overrides one (e.g. --zero stage3_prefetch_bucket_size=200000000). Rows: uniform random
token ids of --seq-len drawn as `ferrylm bench`'s synthetic rows are (numpy's default_rng(seed)), so
the first rows are the ones a bench trial reads. Tokens/s per GPU is --seq-len over the median wall
time of the timed steps (each ends with a synchronise and the loss read back, as the Trainer's log
line does); peak memory is rank 0's. On a machine without CUDA it runs on CPU with gloo and torch's
AdamW, which only checks that the script works.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time

import numpy as np
import torch


def parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def ds_config(cuda: bool, lr: float, zero: dict) -> dict:
    config = {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 1.0,
        "bf16": {"enabled": True},
        "steps_per_print": 10**9,
        "zero_optimization": {"stage": 3, **zero},
    }
    if cuda:
        config["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": lr, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0},
        }
    else:
        config.update(zero_allow_untested_optimizer=True, zero_force_ds_cpu_optimizer=False)
    return config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a model directory (config.json + weights)")
    ap.add_argument("--out", required=True, help="the JSON file rank 0 writes")
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0, help="the rows' seed (ferrylm bench uses train.seed)")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument(
        "--zero",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a zero_optimization setting over DeepSpeed's defaults (repeatable)",
    )
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    # FusedAdam's JIT build cannot parse arch suffixes such as "9.0a" (as ferrylm launch does too).
    if arch := os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = re.sub(r"(\d\.\d)[a-z]", r"\1", arch)
    import deepspeed
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.integrations import HfDeepSpeedConfig

    rank, local_rank = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")
    world = torch.distributed.get_world_size()
    zero = dict(kv.split("=", 1) for kv in args.zero)
    config = ds_config(cuda, args.lr, {k: parse_value(v) for k, v in zero.items()})

    # Setup model: alive before from_pretrained, the DeepSpeed config makes it load under zero.Init.
    keep_alive = HfDeepSpeedConfig(config)  # noqa: F841 - transformers reads it through a weak reference
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()  # from_pretrained returns eval mode, where transformers skips checkpointing
    optimizer = None if cuda else torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    engine, *_ = deepspeed.initialize(
        model=model, optimizer=optimizer, config=config, model_parameters=model.parameters() if cuda else None
    )

    # Setup data: the rows ferrylm bench's synthetic source writes first, this rank's share of them.
    vocab = AutoConfig.from_pretrained(args.model).vocab_size
    rng = np.random.default_rng(args.seed)
    rows = [rng.integers(0, vocab, args.seq_len) for _ in range(world * (args.warmup + args.steps))]
    device = engine.device

    # Train: each step timed from the end of the previous one, as the Trainer's log lines are.
    times, losses = [], []
    last = time.perf_counter()
    for step in range(args.warmup + args.steps):
        ids = torch.as_tensor(rows[step * world + rank], device=device).unsqueeze(0)
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        if cuda:
            torch.cuda.synchronize()
        losses.append(float(loss.detach()))
        now = time.perf_counter()
        times.append(now - last)
        last = now

    timed = times[args.warmup :]
    if rank == 0:
        result = {
            "recipe": "DeepSpeed driven directly (torchrun + deepspeed.initialize), ZeRO-3, bf16, non-reentrant "
            "gradient checkpointing, SDPA, micro-batch 1",
            "deepspeed": deepspeed.__version__,
            "torch": torch.__version__,
            "world_size": world,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu",
            "seq_len": args.seq_len,
            "warmup_steps": args.warmup,
            "steps_timed": len(timed),
            "step_s": times,
            "tokens_per_s_per_gpu": args.seq_len / statistics.median(timed),
            "losses": losses,
            "loss": losses[-1],
            "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30 if cuda else None,
            "zero_overrides": zero,
            "ds_config": config,
        }
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps({k: result[k] for k in ("tokens_per_s_per_gpu", "loss", "peak_allocated_gib")}))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
