"""Train stage: LoRA, QLoRA or a full fine-tune with the HF Trainer (ferrylm/train/recipe.py).

The recipe imports transformers, PEFT and DeepSpeed; it is loaded on first use, so the memory
planner (train.plan), which `ferrylm plan` and `ferrylm doctor` use, imports in milliseconds.
"""

_RECIPE = ("run_train", "TrainingDiverged")


def __getattr__(name: str):
    if name in _RECIPE:
        from . import recipe

        return getattr(recipe, name)
    raise AttributeError(f"module 'ferrylm.train' has no attribute {name!r}")


__all__ = list(_RECIPE)
