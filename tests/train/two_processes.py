"""What the two-process training tests share: the tiny run's overrides and `ferrylm launch --nproc 2`."""

import sys

from tests.pinning import learning_rate


def overrides(run, tiny_qwen2_dir, tiny_corpus, steps: int, save_steps: int, *extra) -> list[str]:
    return [
        f"run_dir={run}",
        f"model.path={tiny_qwen2_dir}",
        f"data.sources=[{tiny_corpus}]",
        f"train.max_steps={steps}",
        f"train.save_steps={save_steps}",
        "train.logging_steps=1",
        "train.per_device_batch_size=2",
        learning_rate(),
        "train.lora_dropout=0",
        "train.warmup_steps=0",
        "train.eval_batches=2",
        *extra,
    ]


def launch(*args: str) -> list[str]:
    """`ferrylm launch --nproc 2` with these arguments: torchrun's standalone rendezvous, two processes."""
    return [sys.executable, "-m", "ferrylm", "launch", "--nproc", "2", *args]
