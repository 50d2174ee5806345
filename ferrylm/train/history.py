"""The training's log history: every Trainer log line kept as log_history.jsonl (the report plots it), cut back on
resume, and summed up for the train record."""

from __future__ import annotations

import json
import time
from pathlib import Path

from transformers import TrainerCallback

from ..log import get_logger

log = get_logger("train")


class HistoryWriter(TrainerCallback):
    """Appends every Trainer log line to log_history.jsonl (the report plots it), and says the step, the loss
    and the time left in the log where no progress bar is drawn (a log file, CI)."""

    def __init__(self, path: Path):
        self.path, self.t0, self.step0 = path, time.monotonic(), 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.t0, self.step0 = time.monotonic(), state.global_step  # a resumed run counts from where it began

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            with open(self.path, "a") as fh:
                fh.write(json.dumps({"step": state.global_step, **logs}) + "\n")
            done = state.global_step - self.step0
            if args.disable_tqdm and "loss" in logs and done > 0:
                elapsed = time.monotonic() - self.t0
                left = elapsed / done * (state.max_steps - state.global_step)
                log.info(
                    "step %d/%d, loss %.4g, %.0f s elapsed, %.0f s left",
                    state.global_step,
                    state.max_steps,
                    logs["loss"],
                    elapsed,
                    left,
                )


def truncate_history(path: Path, step: int) -> None:
    """Drop what a killed run logged after the checkpoint we resume from; it will be logged again."""
    if path.is_file():
        keep = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= step]
        path.write_text("".join(ln + "\n" for ln in keep))


def summarise(history: list[dict]) -> dict:
    train = [h for h in history if "loss" in h and "eval_loss" not in h]
    grads = [h["grad_norm"] for h in train if h.get("grad_norm") is not None]
    return {
        "first_train_loss": train[0]["loss"] if train else None,
        "final_train_loss": train[-1]["loss"] if train else None,
        "final_grad_norm": grads[-1] if grads else None,
        "max_grad_norm_seen": max(grads) if grads else None,
    }
