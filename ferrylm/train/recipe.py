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
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..diskspace import out_of_space
from ..errors import FerryError
from ..log import get_logger
from ..manifest import StageRecord, locked_stage, read_jsonl, read_record, sha256_file, sha256_tree
from ..models import load_tokenizer, resolve_model_path
from .arguments import training_arguments
from .build import build_model, check_liger, choose_attention, choose_precision, compile_layers, zero3_leaf_layers
from .checkpoints import (
    MarkComplete,
    check_room,
    drop_partial,
    latest_complete,
    make_universal,
    saved_world_size,
    writing,
)
from .fsdp import check_world, whole
from .history import HistoryWriter, summarise, truncate_history
from .launch import prepare_distributed_env
from .observe import NonFiniteLoss, RowNames, gradient_guard, guarded_trainer_class, selective_checkpointing

log = get_logger("train")


class PackingLeak(FerryError, RuntimeError):
    pass


class TrainingDiverged(FerryError, RuntimeError):
    pass


def _check_packing(model, row: dict, half: bool) -> None:
    """Packed rows (and flattened micro-batches) are only right if attention stays inside each example:
    prove it on the first one."""
    from .dataset import packing_self_test

    packed, unpacked = packing_self_test(model, row)
    tol = 2e-2 * max(1.0, abs(unpacked)) if half else 1e-4 * max(1.0, abs(unpacked))
    log.info("packing self-test: packed loss %.6f, unpacked %.6f", packed, unpacked)
    if abs(packed - unpacked) > tol:
        raise PackingLeak(
            f"a packed row's loss {packed:.5f} differs from its examples' {unpacked:.5f}; this model's "
            f"attention ({model.config._attn_implementation}) lets packed examples see each other — "
            f"set train.flatten_batches=false and, if the data packs, rebuild it with data.pack=false"
        )


def _save_trained(trainer, tokenizer, out: Path, name: str) -> Path:
    """Write the adapter (or whole model) to out/name in one rename. Every rank calls this: under
    ZeRO-3 and FSDP2 the shards are gathered for the save."""
    final, tmp = out / name, out / f".{name}.tmp"
    if trainer.is_world_process_zero():
        shutil.rmtree(tmp, ignore_errors=True)
    with out_of_space(f"the trained {name}", tmp, lambda: shutil.rmtree(tmp, ignore_errors=True)):
        if trainer.is_fsdp_enabled:  # its checkpoints are sharded: the weights gathered whole, written by rank 0
            state = whole(trainer.accelerator.get_state_dict(trainer.model))
            if trainer.is_world_process_zero():
                trainer.accelerator.unwrap_model(trainer.model).save_pretrained(tmp, state_dict=state)
        else:
            trainer.save_model(str(tmp))
        if trainer.is_world_process_zero():
            tokenizer.save_pretrained(tmp)
    if trainer.is_world_process_zero():
        (tmp / "training_args.bin").unlink(missing_ok=True)  # the Trainer's pickle, not part of the artifact
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
        log.warning(
            "plan: %.1f GiB per GPU needed, %.1f GiB on this GPU; smallest change that fits: %s",
            plan.total_gib,
            setup.gpu_memory_gib,
            plan.advice,
        )
    return plan.total_gib - setup.reserve_gib


@dataclass
class _Run:
    """What the recipe's steps share: the config, where the stage writes, this machine's choices,
    and the checkpoint a run resumes from."""

    cfg: Config
    out: Path
    has_cuda: bool
    precision: str
    attention: str
    resume: Path | None = None
    saved_world: int | None = None  # processes that wrote the resumed DeepSpeed checkpoint
    train_rows: str | None = None  # the data's description of each training row (absent from older data runs)

    @property
    def t(self):
        return self.cfg.train

    @property
    def flatten(self) -> bool:
        return self.t.flatten_batches if self.t.flatten_batches is not None else not self.has_cuda

    @property
    def kind(self) -> str:
        return "model" if self.t.method == "full" else "adapter"

    @property
    def history(self) -> Path:
        return self.out / "log_history.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.out / "checkpoints"

    @property
    def reshard(self) -> bool:
        return self.saved_world is not None and self.saved_world != int(os.environ.get("WORLD_SIZE", "1"))


@locked_stage("train")
def run_train(cfg: Config) -> StageRecord:
    """Set up the run directory (fresh or resumed), the data, the model; train; save."""
    import torch

    record = StageRecord("train", cfg.digest())
    has_cuda = torch.cuda.is_available()
    prepare_distributed_env(cfg.train.deepspeed is not None, has_cuda, sharded=bool(cfg.train.fsdp))
    check_liger(cfg.train, has_cuda)
    run = _Run(
        cfg,
        cfg.stage_dir("train"),
        has_cuda,
        choose_precision(cfg.train.precision, has_cuda),
        choose_attention(cfg.train.attention, has_cuda),
    )
    setup_run_dir(run)
    data = read_record(cfg.stage_dir("data"))  # refuses outputs of an unfinished data run
    data_out = data["outputs"]
    train_set, eval_set = setup_data(run, data_out)
    args = training_arguments(run, len(train_set))  # before the model: ZeRO-3 loads weights straight into shards
    model_dir = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    tokenizer = load_tokenizer(model_dir)
    planned = _planned_peak(cfg, model_dir, args.world_size)
    model = setup_model(run, model_dir, args, train_set)
    trainer = setup_trainer(run, model, args, train_set, eval_set, tokenizer)
    canary = setup_canary(run, trainer, tokenizer, args.world_size, data["metrics"].get("answer_form", "body"))
    check_room(cfg, run.out, model)
    result = train(run, trainer, tokenizer)
    saved = _save_trained(trainer, tokenizer, run.out, run.kind) if cfg.train.save_final else None
    if trainer.is_world_process_zero():
        record.inputs = {"train.arrow": sha256_file(data_out["train"]), "base_model": str(model_dir)}
        record.outputs = {
            "checkpoints": str(run.checkpoints),
            "log_history": str(run.history),
            **({run.kind: str(saved)} if saved else {}),
        }
        record.metrics = _metrics(run, trainer, result, args, saved, planned)
        if canary:
            record.metrics["canary"] = canary.summary(read_jsonl(run.history), trainer.state.best_model_checkpoint)
            if record.metrics["canary"]["over_budget"]:
                log.warning(
                    "canary: no checkpoint stayed within %.1f points of the base's Pass@1; the %s written is the "
                    "last one, and the eval's HumanEval will say how much it forgot",
                    cfg.train.forgetting_budget,
                    run.kind,
                )
        log.info("train: eval loss %.4f → %.4f", record.metrics["base_eval_loss"], record.metrics["eval_loss"])
        record.finish(run.out)
    return record


def setup_run_dir(run: _Run) -> None:
    """Resume from the newest complete checkpoint (train.resume), or start clean: checkpoints of an
    earlier run must not mix with this one's."""
    rank0 = int(os.environ.get("RANK", "0")) == 0
    run.resume = latest_complete(run.checkpoints, clean=rank0) if run.t.resume else None
    if run.resume is None and rank0:
        shutil.rmtree(run.checkpoints, ignore_errors=True)
        run.out.mkdir(parents=True, exist_ok=True)
        run.history.unlink(missing_ok=True)
    elif run.resume is not None and rank0:
        log.info("resuming from %s", run.resume)
        truncate_history(run.history, int(run.resume.name.split("-")[1]))
    if run.resume is not None and run.t.deepspeed:
        run.saved_world = saved_world_size(run.resume)
    if run.resume is not None and run.t.fsdp:
        check_world(run.resume)
    if run.reshard:
        log.info(
            "checkpoint written by %d processes, resuming on %s", run.saved_world, os.environ.get("WORLD_SIZE", "1")
        )
        make_universal(run.resume, rank0)


def setup_data(run: _Run, data_out: dict):
    from .dataset import examples

    t = run.t
    run.train_rows = data_out.get("train_rows")
    return (
        examples(data_out["train"], numbered=True),
        examples(data_out["eval"], limit=t.eval_batches * t.per_device_batch_size),
    )


def setup_model(run: _Run, model_dir, args, train_set):
    from transformers import set_seed

    from .dataset import flattened

    t = run.t
    set_seed(t.seed)  # before LoRA's init, so a run is reproducible from its config alone
    model = build_model(t, model_dir, run.precision, run.attention, run.has_cuda)
    if t.compile == "layers":
        compile_layers(model)
    if t.deepspeed == "zero3" and (t.method == "full" if t.zero3_leaf_layers is None else t.zero3_leaf_layers):
        zero3_leaf_layers(model)
    if run.has_cuda and t.deepspeed != "zero3" and t.method != "qlora":
        model.to(args.device)  # where the Trainer would put it; the packing self-test runs there
    if "position_ids" in train_set.column_names or run.flatten:
        if t.deepspeed == "zero3":
            log.info("packing self-test skipped: under ZeRO-3 the weights are shards until training starts")
        else:
            first = flattened([train_set[i] for i in range(min(2, len(train_set)))]) if run.flatten else train_set[0]
            _check_packing(model, first, run.precision != "fp32")
    return model


def setup_trainer(run: _Run, model, args, train_set, eval_set, tokenizer):
    from .dataset import PadCollator

    # Liger's loss (no faster with scored positions) and a whole compiled model (a shape a batch) get all.
    collate = PadCollator(tokenizer.pad_token_id, run.flatten, not run.t.liger and run.t.compile != "model")
    guard = gradient_guard(run.t.skip_nonfinite_steps)
    trainer = guarded_trainer_class()(
        model=model,
        args=args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        data_collator=collate,
        callbacks=[MarkComplete(), HistoryWriter(run.history), guard],
        drift_penalty=run.t.drift_penalty,
    )
    trainer.gradient_guard, guard.trainer = guard, trainer  # its skipped steps go into the record, with their rows
    trainer.sdpa_cudnn, trainer.row_names = run.t.sdpa_cudnn, RowNames(run.train_rows)
    trainer.fused_head = run.t.head_fused
    if run.t.gradient_checkpointing and run.t.checkpoint_fraction < 1:
        trainer.add_callback(selective_checkpointing(run.t.checkpoint_fraction))
    return trainer


def setup_canary(run: _Run, trainer, tokenizer, world: int, form: str):
    """The general-coding canary (train.canary_tasks), asked in the data's answer form, or None."""
    if not run.t.canary_tasks:
        return None
    if world > 1:
        raise FerryError("train.canary_tasks: the canary generates in one process; run it on one GPU")
    from .canary import Canary

    t = run.t
    canary = Canary(t.canary_tasks, tokenizer, t.forgetting_budget, run.history, t.canary_max_new_tokens, form=form)
    trainer.add_callback(canary)
    return canary


def train(run: _Run, trainer, tokenizer):
    try:
        with out_of_space(
            "a checkpoint", run.checkpoints, lambda: drop_partial(run.checkpoints), lambda: writing(run.checkpoints)
        ):
            return trainer.train(resume_from_checkpoint=str(run.resume) if run.resume else None)
    except NonFiniteLoss as e:
        # Raised before that step's optimizer update: the weights in hand are the last good ones.
        last_good = _save_trained(trainer, tokenizer, run.out, f"last-good-{run.kind}")
        skipped = (
            f" (after skipping steps {', '.join(map(str, e.skipped))}: train.skip_nonfinite_steps)" if e.skipped else ""
        )
        raise TrainingDiverged(
            f"train: the {e.what} became {e.value} at step {e.step}{skipped}; stopped before that step's "
            f"update. The last good weights (step {e.step - 1}) are in {last_good}. Its {e.rows or 'rows: not known'}. "
            f"{e.advice or 'Check those rows'}"
        ) from None


def _metrics(run: _Run, trainer, result, args, saved: Path | None, planned: float | None) -> dict:
    import torch

    t = run.t
    history = read_jsonl(run.history)
    evals = [h["eval_loss"] for h in history if "eval_loss" in h]
    speeds = [h for h in history if "tokens_per_s" in h]
    runtime = result.metrics.get("train_runtime")
    return {
        "method": t.method,
        "steps": trainer.state.global_step,
        "epochs": round(trainer.state.epoch or 0.0, 3),  # passes over the training rows (train.epochs)
        "resumed_from": str(run.resume) if run.resume else None,
        "skipped_steps": list(getattr(getattr(trainer, "gradient_guard", None), "skipped", [])),
        "skipped_step_rows": {str(k): v for k, v in getattr(trainer.gradient_guard, "skipped_rows", {}).items()},
        "sdpa_cudnn": t.sdpa_cudnn,
        "fused_head": t.head_fused,
        "resumed_from_world_size": run.saved_world,
        "base_eval_loss": evals[0],
        "base_perplexity": math.exp(evals[0]),
        "eval_loss": evals[-1],
        "perplexity": math.exp(evals[-1]),
        "train_runtime_s": runtime,
        "tokens_seen": int(trainer.state.num_input_tokens_seen),
        # the run's own (its evals and checkpoints included); the last log line's window beside it
        "tokens_per_s": trainer.state.num_input_tokens_seen / runtime if runtime else None,
        "tokens_per_s_last_window": speeds[-1]["tokens_per_s"] if speeds else None,
        "mfu_last_window": speeds[-1].get("mfu") if speeds else None,
        "precision": run.precision,
        "attention": run.attention,
        "liger": t.liger,
        "compile": t.compile,
        "deepspeed": t.deepspeed,
        "fsdp": t.fsdp,
        "offload": [k for k in ("optimizer", "params") if getattr(t, f"offload_{k}")],
        "world_size": args.world_size,
        f"{run.kind}_sha256": sha256_tree(saved) if saved else None,
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if run.has_cuda else None,
        "peak_gpu_reserved_gib": torch.cuda.max_memory_reserved() / 2**30 if run.has_cuda else None,
        "planned_peak_gib": planned,  # the planner's allocated peak
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "best_eval_loss": trainer.state.best_metric,
        **summarise(history),
    }
