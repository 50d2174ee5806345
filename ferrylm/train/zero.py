"""The DeepSpeed config a train section asks for ("auto" values are filled in from TrainingArguments).

On a GPU, DeepSpeed builds its own AdamW: FusedAdam on the GPU, or its vectorised CPU Adam when
the optimizer is offloaded (each JIT-compiles once). On CPU (the tests), the Trainer's torch AdamW
is handed to ZeRO instead, so nothing needs compiling.
"""

from __future__ import annotations


def _zero_section(
    stage: str, offload_optimizer: bool, offload_params: bool, has_cuda: bool, zero3_sizes: dict | None
) -> dict:
    """The config's "zero_optimization" section."""
    sizes = {k: v if v is not None else "auto" for k, v in (zero3_sizes or {}).items()}
    zero: dict = {
        "stage": {"zero2": 2, "zero3": 3}[stage],
        "contiguous_gradients": True,
        "overlap_comm": has_cuda,  # overlapping needs CUDA streams; gloo on CPU gains nothing
        "reduce_bucket_size": sizes.get("reduce_bucket_size", "auto") if stage == "zero3" else 2e8,
    }
    if stage == "zero2":
        zero["allgather_bucket_size"] = 2e8
    else:
        zero.update(
            stage3_prefetch_bucket_size=sizes.get("stage3_prefetch_bucket_size", "auto"),
            stage3_param_persistence_threshold=sizes.get("stage3_param_persistence_threshold", "auto"),
            stage3_max_live_parameters=1e9,
            stage3_max_reuse_distance=1e9,
            # Gather the shards when saving: without it a ZeRO-3 save writes empty tensors
            # (the empty-adapter failure known from other toolkits).
            stage3_gather_16bit_weights_on_model_save=True,
        )
    if offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": has_cuda}
    if offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": has_cuda}
    return zero


def deepspeed_config(
    stage: str,
    precision: str,
    offload_optimizer: bool = False,
    offload_params: bool = False,
    has_cuda: bool = False,
    load_universal: bool = False,
    zero3_sizes: dict | None = None,
) -> dict:
    """zero3_sizes: {"reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"}
    → elements, each None for the Trainer's "auto"."""
    zero = _zero_section(stage, offload_optimizer, offload_params, has_cuda, zero3_sizes)
    config = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "bf16": {"enabled": precision == "bf16"},
        # Dynamic loss scaling (loss_scale 0): start at 2^16, halve on overflow, double after 1000 good steps.
        "fp16": {
            "enabled": precision == "fp16",
            "loss_scale": 0,
            "initial_scale_power": 16,
            "loss_scale_window": 1000,
            "hysteresis": 2,
            "min_loss_scale": 1,
        },
        "zero_optimization": zero,
    }
    if load_universal:  # resuming a checkpoint written by a different number of processes
        config["checkpoint"] = {"load_universal": True}
    if has_cuda:
        config["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        }
    else:
        config["zero_allow_untested_optimizer"] = True
        config["zero_force_ds_cpu_optimizer"] = False  # torch's AdamW on offloaded states, no op build
    return config
