"""Train stage: LoRA, QLoRA or a full fine-tune with the HF Trainer, optionally under DeepSpeed ZeRO-2/3.

The recipe reads top to bottom: load data → training arguments (before the model: ZeRO-3 loads
weights straight into shards) → build the model → evaluate it untouched (step 0: the base model's
held-out loss) → train with marked checkpoints → evaluate → save the adapter (or the whole model)
atomically → write the record.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
from pathlib import Path

from ..errors import FerryError
from ..config import Config
from ..log import get_logger
from ..manifest import StageRecord, locked_stage, read_record, sha256_file, sha256_tree
from ..models import load_tokenizer, resolve_model_path
from .build import LIGER_LOSS_ONLY, build_model, check_liger, choose_attention, choose_precision, compile_layers
from .checkpoints import MarkComplete, latest_complete, make_universal, saved_world_size
from .observe import NonFiniteLoss, guarded_trainer_class, selective_checkpointing
from .zero import deepspeed_config

log = get_logger("train")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare_distributed_env(use_deepspeed: bool, has_cuda: bool) -> None:
    if use_deepspeed and not has_cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    if use_deepspeed and re.search(r"\d\.\d[a-z]", arch):
        # DeepSpeed's op builder reads "9.0a" as a number and fails; the plain arch builds the same ops.
        os.environ["TORCH_CUDA_ARCH_LIST"] = re.sub(r"(\d\.\d)[a-z]", r"\1", arch)
    import torch

    gpus = torch.cuda.device_count() if has_cuda else 0
    several_gpus = gpus > 1
    if several_gpus and "RANK" not in os.environ:
        # One process on a machine with several GPUs: the Trainer would wrap the model in
        # nn.DataParallel (one process driving every GPU, the loss summed across them). Train on
        # one GPU instead, as a world of one, and say how to use them all.
        log.warning("%d GPUs visible but one process: training on GPU 0; use `ferrylm launch --nproc %d` for all",
                    gpus, gpus)
    if (use_deepspeed or several_gpus) and "RANK" not in os.environ:
        # A single process still needs a process group for DeepSpeed; launchers set these themselves.
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(_free_port()))


class _HistoryWriter:
    """Appends every Trainer log line to log_history.jsonl (the report plots it)."""

    def __new__(cls, path: Path):
        from transformers import TrainerCallback

        class Writer(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if state.is_world_process_zero and logs:
                    with open(path, "a") as fh:
                        fh.write(json.dumps({"step": state.global_step, **logs}) + "\n")

        return Writer()


def _truncate_history(path: Path, step: int) -> None:
    """Drop what a killed run logged after the checkpoint we resume from; it will be logged again."""
    if path.is_file():
        keep = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= step]
        path.write_text("".join(ln + "\n" for ln in keep))


def _summarise(history: list[dict]) -> dict:
    train = [h for h in history if "loss" in h and "eval_loss" not in h]
    grads = [h["grad_norm"] for h in train if h.get("grad_norm") is not None]
    return {
        "first_train_loss": train[0]["loss"] if train else None,
        "final_train_loss": train[-1]["loss"] if train else None,
        "final_grad_norm": grads[-1] if grads else None,
        "max_grad_norm_seen": max(grads) if grads else None,
    }


class PackingLeak(FerryError, RuntimeError):
    pass


class TrainingDiverged(FerryError, RuntimeError):
    pass


def _check_packing(model, row: dict, half: bool) -> None:
    """Packed rows are only right if attention stays inside each example: prove it on the first row."""
    from .dataset import packing_self_test

    packed, unpacked = packing_self_test(model, row)
    tol = 2e-2 * max(1.0, abs(unpacked)) if half else 1e-4 * max(1.0, abs(unpacked))
    log.info("packing self-test: packed loss %.6f, unpacked %.6f", packed, unpacked)
    if abs(packed - unpacked) > tol:
        raise PackingLeak(f"data.pack: a packed row's loss {packed:.5f} differs from its examples' {unpacked:.5f}; "
                          f"this model's attention ({model.config._attn_implementation}) lets packed examples see "
                          f"each other — rebuild the data with data.pack=false")


def _save_trained(trainer, tokenizer, out: Path, name: str) -> Path:
    """Write the adapter (or whole model) to out/name in one rename. Every rank calls this: under
    ZeRO-3 the shards are gathered for the save."""
    final, tmp = out / name, out / f".{name}.tmp"
    if trainer.is_world_process_zero():
        shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(tmp)
        (tmp / "training_args.bin").unlink(missing_ok=True)   # the Trainer's pickle, not part of the artifact
        shutil.rmtree(final, ignore_errors=True)
        tmp.replace(final)
    return final


def _planned_peak(cfg: Config, model_dir, world: int) -> float | None:
    """`ferrylm plan`'s allocated peak per GPU for this run on this GPU (None on CPU); warns when it
    says the run will not fit, so an OOM an hour in is announced at the start."""
    import torch

    from .plan import GiB, ModelShape, estimate, setup_from_config

    if not torch.cuda.is_available():
        return None
    setup = setup_from_config(cfg, ModelShape.from_hf_config(json.loads((Path(model_dir) / "config.json").read_text())))
    setup.gpus, setup.gpu_memory_gib = world, torch.cuda.get_device_properties(0).total_memory / GiB
    plan = estimate(setup)
    if not plan.fits:
        log.warning("plan: %.1f GiB per GPU needed, %.1f GiB on this GPU; smallest change that fits: %s",
                    plan.total_gib, setup.gpu_memory_gib, plan.advice)
    return plan.total_gib - setup.reserve_gib


@locked_stage("train")
def run_train(cfg: Config) -> StageRecord:
    import torch
    from transformers import TrainingArguments, set_seed

    from .dataset import PadCollator, examples

    t = cfg.train
    has_cuda = torch.cuda.is_available()
    _prepare_distributed_env(t.deepspeed is not None, has_cuda)
    precision = choose_precision(t.precision, has_cuda)
    attention = choose_attention(t.attention, has_cuda)
    check_liger(t, has_cuda)

    out = cfg.stage_dir("train")
    ckpt_dir = out / "checkpoints"
    record = StageRecord("train", cfg.digest())
    data_out = read_record(cfg.stage_dir("data"))["outputs"]   # refuses outputs of an unfinished data run
    train_set = examples(data_out["train"])
    eval_set = examples(data_out["eval"], limit=t.eval_batches * t.per_device_batch_size)
    model_dir = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    tokenizer = load_tokenizer(model_dir)

    history_path = out / "log_history.jsonl"
    rank0 = int(os.environ.get("RANK", "0")) == 0
    resume = latest_complete(ckpt_dir, clean=rank0) if t.resume else None
    if resume is None and rank0:
        # A fresh run: checkpoints of an earlier run must not mix with this one's.
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        history_path.unlink(missing_ok=True)
    elif resume is not None and rank0:
        log.info("resuming from %s", resume)
        _truncate_history(history_path, int(resume.name.split("-")[1]))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    saved_world = saved_world_size(resume) if resume is not None and t.deepspeed else None
    reshard = saved_world is not None and saved_world != world
    if reshard:
        log.info("checkpoint written by %d processes, resuming on %d", saved_world, world)
        make_universal(resume, rank0)
    # TensorBoard's callback takes its directory from the environment in transformers 5.
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(out / "tensorboard")
    args = TrainingArguments(
        output_dir=str(ckpt_dir),
        max_steps=t.max_steps,
        per_device_train_batch_size=t.per_device_batch_size,
        per_device_eval_batch_size=t.per_device_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        learning_rate=t.learning_rate,
        weight_decay=t.weight_decay,
        warmup_steps=t.warmup_steps,
        lr_scheduler_type="cosine",
        max_grad_norm=t.max_grad_norm,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        gradient_checkpointing=t.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        use_liger_kernel=t.liger,
        # Compiled layers do the fusing; Liger then only replaces the output layer + loss.
        liger_kernel_config=LIGER_LOSS_ONLY if t.liger and t.compile == "layers" else None,
        torch_compile=t.compile == "model",
        logging_steps=t.logging_steps,
        save_strategy="steps" if t.save_steps else "no",
        save_steps=t.save_steps or None,
        save_total_limit=t.save_total_limit,
        # Evaluating at step 0 inside the training loop (not via evaluate() before it) works under
        # ZeRO too, which refuses evaluate() before its engine exists. Nothing has been updated at
        # step 0 (LoRA starts as the identity), so that eval loss is the base model's.
        eval_strategy="steps",
        eval_steps=t.save_steps if t.keep_best else t.max_steps,
        metric_for_best_model="eval_loss" if t.keep_best else None,
        greater_is_better=False if t.keep_best else None,
        eval_on_start=resume is None,
        report_to=list(t.report_to),
        seed=t.seed,
        data_seed=t.seed,
        use_cpu=not has_cuda,
        ddp_backend="gloo" if ("RANK" in os.environ and not has_cuda) else None,
        deepspeed=deepspeed_config(t.deepspeed, precision, t.offload_optimizer, t.offload_params, has_cuda,
                                   load_universal=reshard) if t.deepspeed else None,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        include_num_input_tokens_seen="non_padding",
        disable_tqdm=not os.isatty(2),
    )

    planned = _planned_peak(cfg, model_dir, args.world_size)
    set_seed(t.seed)  # before LoRA's init, so a run is reproducible from its config alone
    model = build_model(t, model_dir, precision, attention, has_cuda)
    if t.compile == "layers":
        compile_layers(model)
    if has_cuda and t.deepspeed != "zero3" and t.method != "qlora":
        model.to(args.device)   # where the Trainer would put it; the packing self-test runs there
    if "position_ids" in train_set.column_names:
        if t.deepspeed == "zero3":
            log.info("packing self-test skipped: under ZeRO-3 the weights are shards until training starts")
        else:
            _check_packing(model, train_set[0], precision != "fp32")
    trainer = guarded_trainer_class()(model=model, args=args, train_dataset=train_set, eval_dataset=eval_set,
                                      data_collator=PadCollator(tokenizer.pad_token_id),
                                      callbacks=[MarkComplete(), _HistoryWriter(history_path)])
    if t.gradient_checkpointing and t.checkpoint_fraction < 1:
        trainer.add_callback(selective_checkpointing(t.checkpoint_fraction))

    kind = "model" if t.method == "full" else "adapter"
    try:
        result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    except NonFiniteLoss as e:
        # Raised before that step's optimizer update: the weights in hand are the last good ones.
        last_good = _save_trained(trainer, tokenizer, out, f"last-good-{kind}")
        raise TrainingDiverged(f"train: the loss became {e.value} at step {e.step}; stopped before that step's "
                               f"update. The last good weights (step {e.step - 1}) are in {last_good}; lower "
                               f"train.learning_rate or check the data") from None

    saved = _save_trained(trainer, tokenizer, out, kind)
    if trainer.is_world_process_zero():
        history = [json.loads(line) for line in history_path.read_text().splitlines() if line.strip()]
        evals = [h["eval_loss"] for h in history if "eval_loss" in h]
        base_eval, final_eval = evals[0], evals[-1]
        speeds = [h for h in history if "tokens_per_s" in h]
        record.inputs = {"train.arrow": sha256_file(data_out["train"]), "base_model": str(model_dir)}
        record.outputs = {kind: str(saved), "checkpoints": str(ckpt_dir), "log_history": str(history_path)}
        record.metrics = {
            "method": t.method,
            "steps": trainer.state.global_step,
            "resumed_from": str(resume) if resume else None,
            "resumed_from_world_size": saved_world,
            "base_eval_loss": base_eval,
            "base_perplexity": math.exp(base_eval),
            "eval_loss": final_eval,
            "perplexity": math.exp(final_eval),
            "train_runtime_s": result.metrics.get("train_runtime"),
            "tokens_seen": int(trainer.state.num_input_tokens_seen),
            "tokens_per_s": speeds[-1]["tokens_per_s"] if speeds else None,
            "mfu": speeds[-1].get("mfu") if speeds else None,
            "precision": precision,
            "attention": attention,
            "liger": t.liger,
            "compile": t.compile,
            "deepspeed": t.deepspeed,
            "offload": [k for k in ("optimizer", "params") if getattr(t, f"offload_{k}")],
            "world_size": args.world_size,
            f"{kind}_sha256": sha256_tree(saved),
            "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if has_cuda else None,
            "planned_peak_gib": planned,   # the planner's allocated peak
            "best_checkpoint": trainer.state.best_model_checkpoint,
            "best_eval_loss": trainer.state.best_metric,
            **_summarise(history),
        }
        log.info("train: eval loss %.4f → %.4f", base_eval, final_eval)
        record.finish(out)
    return record
