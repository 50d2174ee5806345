"""The Trainer's settings for a run, in one place: what the train config asks for, this machine's
precision, where checkpoints and TensorBoard go, and DeepSpeed's config (resharded on resume when
the number of processes changed) or FSDP2's."""

from __future__ import annotations

import math
import os

from .build import liger_config
from .zero import deepspeed_config


def _deepspeed(run) -> dict:
    t = run.t
    sizes = {
        "reduce_bucket_size": t.zero3_reduce_bucket_size,
        "stage3_prefetch_bucket_size": t.zero3_prefetch_bucket_size,
        "stage3_param_persistence_threshold": t.zero3_param_persistence_threshold,
    }
    return deepspeed_config(
        t.deepspeed,
        run.precision,
        t.offload_optimizer,
        t.offload_params,
        run.has_cuda,
        load_universal=run.reshard,
        zero3_sizes=sizes,
    )


def _fsdp(run) -> dict:
    """FSDP2 through the Trainer (Accelerate's plugin): each decoder layer (the model's `_no_split_modules`) and the
    whole model sharded, activation checkpointing its own, checkpoints sharded."""
    t = run.t
    return {
        "version": 2,
        "reshard_after_forward": t.fsdp == "full_shard",
        "cpu_offload": t.offload_params and run.has_cuda,  # on a CPU they are there already (and pinning needs CUDA)
        "activation_checkpointing": t.gradient_checkpointing,
        "state_dict_type": "SHARDED_STATE_DICT",
    }


def optimizer_steps(t, rows: int, world: int) -> int:
    """train.max_steps, or with train.epochs the steps that pass over `rows` that many times on `world` processes."""
    if t.epochs is None:
        return t.max_steps
    return max(1, math.ceil(t.epochs * rows / (t.per_device_batch_size * t.gradient_accumulation_steps * world)))


def training_arguments(run, rows: int):
    """Every Trainer setting in one place; `rows`: the training examples (train.epochs counts passes over them)."""
    from transformers import TrainingArguments

    t, has_cuda = run.t, run.has_cuda
    steps = optimizer_steps(t, rows, int(os.environ.get("WORLD_SIZE", "1")))
    # TensorBoard's callback takes its directory from the environment in transformers 5.
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(run.out / "tensorboard")
    return TrainingArguments(
        output_dir=str(run.checkpoints),
        max_steps=steps,
        per_device_train_batch_size=t.per_device_batch_size,
        per_device_eval_batch_size=t.per_device_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        learning_rate=t.learning_rate,
        weight_decay=t.weight_decay,
        warmup_steps=t.warmup_steps,
        lr_scheduler_type="cosine",
        max_grad_norm=t.max_grad_norm,
        bf16=run.precision == "bf16",
        fp16=run.precision == "fp16",
        # under FSDP2 its own activation checkpointing (the Trainer's would gather each layer once more)
        gradient_checkpointing=t.gradient_checkpointing and not t.fsdp,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        use_liger_kernel=t.liger,
        liger_kernel_config=liger_config(t),
        torch_compile=t.compile == "model",
        logging_steps=t.logging_steps,
        save_strategy="steps" if t.save_steps else "no",
        save_steps=t.save_steps or None,
        save_total_limit=t.save_total_limit,
        # Evaluating at step 0 inside the training loop (not via evaluate() before it) works under
        # ZeRO too, which refuses evaluate() before its engine exists. Nothing has been updated at
        # step 0 (LoRA starts as the identity), so that eval loss is the base model's.
        eval_strategy="steps",
        eval_steps=t.save_steps if t.keep_best else steps,
        # with the canary: the held-out loss of checkpoints within the forgetting budget, and that one trained on
        metric_for_best_model=("guarded_loss" if t.canary_tasks else "eval_loss") if t.keep_best else None,
        greater_is_better=False if t.keep_best else None,
        load_best_model_at_end=bool(t.canary_tasks),
        eval_on_start=run.resume is None,
        report_to=list(t.report_to),
        seed=t.seed,
        data_seed=t.seed,
        use_cpu=not has_cuda,
        ddp_backend="gloo" if ("RANK" in os.environ and not has_cuda) else None,
        deepspeed=_deepspeed(run) if t.deepspeed else None,
        fsdp=bool(t.fsdp),
        fsdp_config=_fsdp(run) if t.fsdp else None,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        # A flattened micro-batch has no padding, and no attention mask to count the padding by.
        include_num_input_tokens_seen="all" if run.flatten else "non_padding",
        disable_tqdm=not os.isatty(2),
    )
