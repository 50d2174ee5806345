"""The general-coding canary: a fixed, seeded draw of HumanEval tasks, generated greedily by the model in
training and executed in the sandbox at every evaluation, beside the held-out loss.

A fine-tune can lower its held-out loss while it forgets how to code (Qwen2.5-Coder-1.5B: held-out loss
1.531 → 1.186 while HumanEval fell 66.5 % → 47.6 %). With `train.canary_tasks`, the checkpoint kept is the
one with the lowest held-out loss among those whose canary Pass@1 is within `train.forgetting_budget`
points of the base's (step 0). The eval stage then leaves these tasks out of HumanEval(-X): choosing a
checkpoint on the tasks the report scores would flatter it.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import TrainerCallback

from ..eval.tasks import humaneval
from ..eval.tasks.benchmark import execute
from ..log import get_logger
from ..prompts import user_message

log = get_logger("train")

# The canary's draw (seeded apart from eval.subset_seed's, so the two never mean the same tasks by chance)
SEED = 1729
GUARDED = "eval_guarded_loss"  # the held-out loss, or +inf where the canary fell past the budget


def problems(n: int) -> list[dict]:
    return humaneval.select(humaneval.load_problems(), n, SEED)


def task_number(task_id: str) -> str:
    """ "HumanEval/12", "CPP/12" -> "12": the same problem in every language of HumanEval-X."""
    return task_id.rsplit("/", 1)[-1]


def replies(model, tokenizer, items: list[dict], max_new_tokens: int, batch: int, form: str = "body") -> list[str]:
    """Greedy chat replies to the eval's own HumanEval question (in the data's answer form), left-padded
    batches."""
    import torch

    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": user_message(p["prompt"], "python", form)}],
            tokenize=False,
            add_generation_prompt=True,
        )
        for p in items
    ]
    out: list[str] = []
    try:
        for i in range(0, len(prompts), batch):
            ids = tokenizer(prompts[i : i + batch], return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                gen = model.generate(
                    **ids.to(model.device),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                    use_cache=True,
                )
            out += tokenizer.batch_decode(gen[:, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return out


class Canary(TrainerCallback):
    """At each evaluation: the canary's Pass@1 into the metrics and the history, and the guarded loss
    that train.keep_best chooses by."""

    def __init__(self, n, tokenizer, budget_points: float, history: Path, max_new_tokens: int, batch=16, form="body"):
        self.items, self.tokenizer, self.budget, self.form = problems(n), tokenizer, budget_points, form
        self.history, self.max_new_tokens, self.batch = history, max_new_tokens, batch
        self.base = self._base_from_history()  # a resumed run measured its base before

    @property
    def task_ids(self) -> list[str]:
        return [p["task_id"] for p in self.items]

    def _base_from_history(self) -> float | None:
        if not self.history.is_file():
            return None
        seen = [json.loads(ln) for ln in self.history.read_text().splitlines() if "eval_canary_pass_at_1" in ln]
        return next((h["eval_canary_pass_at_1"] for h in seen if h["step"] == 0), None)

    def measure(self, model) -> tuple[float, list[str]]:
        texts = replies(model, self.tokenizer, self.items, self.max_new_tokens, self.batch, self.form)
        track = humaneval.track(self.items)
        samples = [(p["task_id"], humaneval.completion_from_reply(p, t)) for p, t in zip(self.items, texts)]
        results = execute(track, samples, memory_mb=1024, workers=4, what="canary execution")
        passed = [r["task_id"] for r in results if r["passed"]]
        return len(passed) / len(self.items), passed

    def on_evaluate(self, args, state, control, model=None, metrics=None, **kwargs):
        rate, passed = self.measure(model)
        if self.base is None and state.global_step == 0:
            self.base = rate
        drop = 100 * ((self.base if self.base is not None else rate) - rate)
        metrics["eval_canary_pass_at_1"] = rate
        metrics[GUARDED] = metrics["eval_loss"] if drop <= self.budget else float("inf")
        entry = {"step": state.global_step, "eval_canary_pass_at_1": rate, "canary_passed": passed}
        if state.is_world_process_zero:
            with open(self.history, "a") as fh:
                fh.write(json.dumps(entry | {"canary_within_budget": drop <= self.budget}) + "\n")
        log.info(
            "canary at step %d: Pass@1 %.3f on %d HumanEval tasks (base %s, budget %.1f points)%s",
            state.global_step,
            rate,
            len(self.items),
            "—" if self.base is None else f"{self.base:.3f}",
            self.budget,
            "" if drop <= self.budget else ": past the budget, not kept",
        )

    def summary(self, history: list[dict], best_checkpoint: str | None) -> dict:
        """What the record says: the tasks, the base's and each evaluation's Pass@1, the step kept."""
        evals = [h for h in history if "eval_canary_pass_at_1" in h]
        kept = int(best_checkpoint.rsplit("-", 1)[1]) if best_checkpoint else None
        return {
            "tasks": self.task_ids,
            "budget_points": self.budget,
            "base_pass_at_1": self.base,
            "per_eval": [
                {"step": h["step"], "pass_at_1": h["eval_canary_pass_at_1"], "within_budget": h["canary_within_budget"]}
                for h in evals
            ],
            "kept_step": kept,
            "kept_pass_at_1": next((h["eval_canary_pass_at_1"] for h in evals if h["step"] == kept), None),
            # no checkpoint stayed within the budget: the weights written are the last, which forgot
            "over_budget": kept is None,
        }
