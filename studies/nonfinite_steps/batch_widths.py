"""Which steps of a run will pad a micro-batch to 64 mod 128 tokens, and which rows they hold: the trainer's own
sampler and collator over a data run's rows, no model (a tiny random one stands in), on the CPU.

    .venv/bin/python studies/nonfinite_steps/batch_widths.py RUN_DIR --config demo-gpu [--steps N] [dotted overrides...]

RUN_DIR holds a finished data stage (its data/record.json); the overrides are the run's own (train.seed moves the
order, train.per_device_batch_size and gradient_accumulation_steps the batches). Prints one line per such step.
"""

import argparse
import json
from pathlib import Path


def steps(run_dir: Path, preset: str, overrides: list[str], n: int) -> list[dict]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ferrylm.config.loader import load_config
    from ferrylm.train.arguments import training_arguments
    from ferrylm.train.dataset import PadCollator
    from ferrylm.train.observe import guarded_trainer_class
    from ferrylm.train.recipe import _Run, setup_data

    cfg = load_config(preset, [f"run_dir={run_dir}", "train.report_to=[]", *overrides])
    run = _Run(cfg, cfg.stage_dir("train"), True, "fp32", "sdpa")  # as on a GPU: padded rows, not flattened
    data = json.loads((run_dir / "data" / "record.json").read_text())["outputs"]
    train_set, eval_set = setup_data(run, data)
    tiny = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=8,
            hidden_size=8,
            intermediate_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
        )
    )
    trainer = guarded_trainer_class()(
        model=tiny,
        args=training_arguments(run, len(train_set)),
        train_dataset=train_set,
        eval_dataset=eval_set,
        data_collator=PadCollator(0),
    )
    loader, out, micro, epoch = trainer.get_train_dataloader(), [], [], 0
    while len(out) < n:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        for batch in loader:
            micro.append((batch["row"].tolist(), int(batch["input_ids"].shape[1])))
            if len(micro) == cfg.train.gradient_accumulation_steps:
                out.append(
                    {"step": len(out) + 1, "widths": [w for _, w in micro], "rows": [r for rs, _ in micro for r in rs]}
                )
                micro = []
                if len(out) == n:
                    break
        epoch += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--config", default="demo-gpu")
    ap.add_argument("--steps", type=int, default=110)
    ap.add_argument("overrides", nargs="*")
    a = ap.parse_args()
    from ferrylm.train.observe import RowNames

    names = RowNames(json.loads((a.run_dir / "data" / "record.json").read_text())["outputs"].get("train_rows"))
    hits = [s for s in steps(a.run_dir, a.config, a.overrides, a.steps) if any(w % 128 == 64 for w in s["widths"])]
    print(f"steps with a micro-batch 64 mod 128 tokens wide: {[s['step'] for s in hits]}")
    for s in hits:
        long = [n for n in names(s["rows"]) if any(f"; {w:,} tokens)" in n for w in s["widths"] if w % 128 == 64)]
        print(f"step {s['step']}: widths {s['widths']}; the row that sets it: {'; '.join(long)}")


if __name__ == "__main__":
    main()
