"""What a run reports while it runs, and the one failure it must stop on.

`GuardedTrainer` is the HF Trainer with two additions:
- every log line gains tokens/s (non-padding tokens since the last line), peak GPU memory, GPU
  utilisation (NVML) and MFU
  (on GPUs whose bf16 dense peak we know; weight FLOPs 6·N, or 4·N with a frozen base, plus
  attention's 12·layers·hidden·example length), so TensorBoard / W&B / MLflow and log_history all
  get them;
- with train.drift_penalty, the training loss gains the penalty for drifting from the base (drift.py)
  and the log lines the KL measured, per answer token (`kl_to_base`);
- a non-finite loss, or non-finite gradients behind a finite loss, raise `NonFiniteLoss` before that
  step's optimizer update, so the weights in hand are the last good ones (the train stage saves them
  and stops with a clear message); the step's rows are named (`RowNames`) and the advice follows from
  what the step shows (`advice`);
- its steps run SDPA without the cuDNN kernels unless train.sdpa_cudnn (`training_sdpa`).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from pathlib import Path

import torch

# bf16 dense tensor-core peaks, FLOP/s (vendor data sheets).
PEAK_BF16_FLOPS = {
    "H200": 989e12,
    "H100": 989e12,
    "A800": 312e12,
    "A100": 312e12,
    "A40": 149.7e12,
    "A6000": 154.8e12,
    "L40S": 362e12,
    "4090": 165e12,
}


class NonFiniteLoss(RuntimeError):
    def __init__(
        self,
        step: int,
        value: float,
        what: str = "loss",
        skipped: list[int] | None = None,
        rows: str = "",
        advice: str = "",
    ):
        super().__init__(f"{what} {value} at step {step}")
        self.step, self.value, self.what, self.skipped = step, value, what, skipped or []
        self.rows, self.advice = rows, advice


def training_sdpa(cudnn: bool):
    """The SDPA kernels a training step may use: all but cuDNN's unless `cudnn` (train.sdpa_cudnn). Its
    backward on Hopper leaves the zero-filled half of a 128-key tile unmasked when the keys number 64 mod 128:
    exp(0 - lse) overflows for rows whose log-sum-exp is below -88.7, and the query gradient becomes NaN."""
    if cudnn:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class RowNames:
    """The training rows by index as the data stage described them (train_rows.jsonl: a line a row)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None

    def __call__(self, rows: list[int]) -> list[str]:
        wanted, found = set(rows), {}
        if self.path is not None and self.path.is_file():
            with open(self.path) as fh:
                for i, line in enumerate(fh):
                    if i in wanted:
                        found[i] = json.loads(line)
                    if len(found) == len(wanted):
                        break
        return [f"row {i} ({self._about(found[i])})" if i in found else f"row {i}" for i in rows]

    @staticmethod
    def _about(line: dict) -> str:
        parts = []
        for ex in line["examples"]:
            what = ex.get("function") or ex.get("file") or ex.get("conversation") or "?"
            kind = ", ".join(str(ex[k]) for k in ("task", "language") if k in ex)
            parts.append(f"{ex.get('repository', '?')}: {what}" + (f", {kind}" if kind else ""))
        return f"{'; '.join(parts)}; {line['tokens']:,} tokens"


def advice(widths: list[int], history: list[dict], cudnn: bool, cuda: bool) -> str:
    """What to do about a non-finite step, from what it shows: the cuDNN kernels' known fault where they ran at
    its width, the learning rate only where the logged gradient norm was already climbing, else the rows."""
    if cudnn and cuda and any(w % 128 == 64 for w in widths):
        return (
            "A micro-batch was padded to 64 mod 128 tokens with SDPA's cuDNN kernels on, whose backward returns NaN "
            "there (docs/train.md, Non-finite steps): set train.sdpa_cudnn=false"
        )
    norms = [h["grad_norm"] for h in history if isinstance(h.get("grad_norm"), (int, float)) and h["grad_norm"] < 1e30]
    if len(norms) >= 3 and max(norms[-2:]) > 5 * statistics.median(norms[:-2]):
        return (
            f"The gradient norm was climbing before it (median {statistics.median(norms[:-2]):.3g}, "
            f"then {max(norms[-2:]):.3g}): lower train.learning_rate"
        )
    return (
        "The gradient norm was steady before this step, so it is this step's rows, not the learning rate: "
        "train them alone with train.attention=eager to tell an attention kernel's fault from the data's "
        "(docs/train.md, Non-finite steps)"
    )


def gradient_guard(skips: int = 0):
    """A callback that keeps a step whose gradients are not finite from the weights: a NaN in one gradient
    (clipping then spreads it to all) would otherwise reach every weight while that step's loss looked
    finite. Up to `skips` such steps a run are skipped (their gradients dropped, so the optimizer leaves
    every weight and its moments as they were; `skipped` lists them); one more stops the run."""
    from transformers import TrainerCallback

    class GradientGuard(TrainerCallback):
        skipped: list[int] = []

        skipped_rows: dict[int, str] = {}
        trainer = None  # the GuardedTrainer: the step's rows and widths

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            params = [p for p in model.parameters() if p.grad is not None] if model is not None else []
            if not params:  # none where DeepSpeed holds them (it has its own overflow check)
                return
            norm = torch.nn.utils.get_total_norm([p.grad for p in params])
            if torch.isfinite(norm):
                return
            step = state.global_step + 1
            rows = self.trainer.step_rows() if self.trainer is not None else ""
            if len(self.skipped) >= skips:
                raise NonFiniteLoss(
                    step,
                    float(norm),
                    "gradient norm",
                    self.skipped,
                    rows,
                    self.trainer.advice() if self.trainer else "",
                )
            self.skipped = [*self.skipped, step]
            self.skipped_rows = {**self.skipped_rows, step: rows}
            from ..log import get_logger

            get_logger("train").warning(
                "gradient norm %s at step %d behind a finite loss: that step is skipped (%d of %d a run); its %s",
                float(norm),
                step,
                len(self.skipped),
                skips,
                rows or "rows: not known",
            )
            for p in params:  # a parameter without a gradient is one the optimizer passes over
                p.grad = None

    return GradientGuard()


def peak_flops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)


def flops_per_token(model) -> float:
    """Weight FLOPs per trained token: 6·N for a full fine-tune; 4·N when the base is frozen (no
    weight gradients for it)."""
    from .build import parameter_count

    trainable, total = parameter_count(model)
    return (4.0 if trainable < total else 6.0) * total


def attention_flops_per_token(model, context: float) -> float:
    """Attention's score and value products, forward and backward, for a token in an example of
    `context` tokens: 12·layers·hidden·context (the usual MFU convention, causal masking not
    discounted). `context` is the example's length, not the packed row's."""
    c = model.config
    return 12.0 * c.num_hidden_layers * c.hidden_size * context


def example_lengths(inputs: dict) -> list[int]:
    """Lengths of the examples in a batch: packed rows split where their position ids restart."""
    if "position_ids" in inputs:
        lengths = []
        for row in inputs["position_ids"].tolist():
            starts = [i for i, p in enumerate(row) if p == 0] + [len(row)]
            lengths += [b - a for a, b in zip(starts, starts[1:])]
        return lengths
    return inputs["attention_mask"].sum(dim=1).tolist()


class StepRows:
    """A Trainer mixin: the rows and padded widths of the step in hand, taken from the collator's `row` (not a
    model input), so a step that fails names them; and the training steps' SDPA kernels (train.sdpa_cudnn)."""

    sdpa_cudnn = False  # train.sdpa_cudnn
    row_names = RowNames(None)  # the data's description of each training row
    _rows = (0, [], [])  # (the step, its rows, its micro-batches' padded widths)

    def _note_rows(self, inputs: dict) -> None:
        step = self.state.global_step + 1
        if self._rows[0] != step:
            self._rows = (step, [], [])
        rows = inputs.pop("row", None)  # the collator's row indices: not a model input
        if rows is not None:
            self._rows[1].extend(int(r) for r in rows.reshape(-1).tolist())
        self._rows[2].append(int(inputs["input_ids"].shape[-1]))

    def step_rows(self) -> str:
        """This step's rows as the data described them, and the widths its micro-batches were padded to."""
        _, rows, widths = self._rows
        named = "; ".join(self.row_names(rows)) if rows else "rows not known"
        return f"rows: {named}; micro-batches {' and '.join(map(str, widths))} tokens wide"

    def advice(self) -> str:
        return advice(self._rows[2], self.state.log_history, self.sdpa_cudnn, torch.cuda.is_available())


def guarded_trainer_class():
    from transformers import Trainer

    from .drift import DriftPenalty
    from .fsdp import ShardedOnCpu
    from .heldout import TokenMeanEval

    class GuardedTrainer(StepRows, DriftPenalty, TokenMeanEval, ShardedOnCpu, Trainer):
        _last = None  # (time, tokens seen) at the previous log line
        _flops = None  # weight FLOPs per trained token
        _sq = _n = 0  # Σ length² and Σ length over examples since the last log line (attention FLOPs)
        _peak = None  # the GPU's bf16 peak FLOP/s (0: unknown, no MFU)

        def training_step(self, model, inputs, num_items_in_batch=None):
            self._note_rows(inputs)
            if self._last is None:
                self._last = (time.perf_counter(), self.state.num_input_tokens_seen or 0)
            if self._peak is None:
                self._peak = peak_flops() or 0.0
            if self._peak:  # example lengths only feed MFU, which needs a known GPU peak
                lengths = example_lengths(inputs)
                self._sq += sum(n * n for n in lengths)
                self._n += sum(lengths)
            with training_sdpa(self.sdpa_cudnn):  # the backward runs inside: gradient checkpointing's recompute too
                loss = super().training_step(model, inputs, num_items_in_batch)
            if not torch.isfinite(loss).all():
                raise NonFiniteLoss(
                    self.state.global_step + 1, float(loss), rows=self.step_rows(), advice=self.advice()
                )
            return loss

        def log(self, logs: dict, *args, **kwargs) -> None:
            if "loss" in logs and "eval_loss" not in logs:
                logs.update(self._throughput())
            super().log(logs, *args, **kwargs)

        def _throughput(self) -> dict:
            now, seen = time.perf_counter(), self.state.num_input_tokens_seen or 0
            out = {}
            if self._last is not None and now > self._last[0]:
                world = max(1, self.args.world_size)
                tps = (seen - self._last[1]) / (now - self._last[0])
                out["tokens_per_s"] = tps
                peak = self._peak
                if peak:
                    if self._flops is None:  # the model's size does not change during a run
                        self._flops = flops_per_token(self.model)
                    context = self._sq / self._n if self._n else 0.0
                    flops = self._flops + attention_flops_per_token(self.model, context)
                    out["mfu"] = flops * tps / world / peak
            if torch.cuda.is_available():
                out["gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
                try:  # NVML's busy percentage over its last sample period; needs nvidia-ml-py
                    out["gpu_utilization"] = float(torch.cuda.utilization())
                except Exception:  # noqa: BLE001 - no NVML: the line simply lacks it
                    pass
            self._last, self._sq, self._n = (now, seen), 0, 0
            return out | self.drift_since_last_log()

    return GuardedTrainer


def selective_checkpointing(fraction: float):
    """A callback that, once the Trainer has turned gradient checkpointing on, keeps it only on the
    first `fraction` of the decoder layers."""
    from transformers import TrainerCallback

    class Selective(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            layers = [
                m
                for m in model.modules()
                if hasattr(m, "gradient_checkpointing") and type(m).__name__.endswith("DecoderLayer")
            ]
            keep = round(fraction * len(layers))
            for i, layer in enumerate(layers):
                layer.gradient_checkpointing = i < keep
            from ..log import get_logger

            get_logger("train").info("selective checkpointing: %d of %d decoder layers recompute", keep, len(layers))

    return Selective()
