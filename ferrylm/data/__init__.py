"""Data stage: code trees (or chat files) → cleaned, deduplicated, split by repository → tokenized,
loss-masked (and optionally packed) rows in memory-mapped Arrow files, plus a stats report.

Formats: "sft" docstring→body pairs rendered with the model's chat template; "cpt" raw code with
fill-in-the-middle for continued pre-training (always packed); "jsonl" the user's alpaca / sharegpt /
OpenAI-messages files. Outputs in <run>/data: train.arrow, eval.arrow (input_ids, labels and, when
packed, position_ids), eval.jsonl (held-out prompts and references for parity and BLEU), shots.jsonl
(a few training examples per task and language, for the eval's few-shot base), stats.json /
stats.md / lengths.png.
"""

from .stage import EmptyCorpus, eval_units, run_data

__all__ = ["EmptyCorpus", "eval_units", "run_data"]
