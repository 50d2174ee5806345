"""The rendered JSONL examples as a torch dataset, and a collator that pads them."""
from __future__ import annotations

from pathlib import Path

import torch

from ..data import read_jsonl
from ..data.render import IGNORE_INDEX


class JsonlExamples(torch.utils.data.Dataset):
    def __init__(self, path: str | Path, limit: int | None = None):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: run `ferrylm data` first")
        self.rows = read_jsonl(path, limit)
        if not self.rows:
            raise ValueError(f"{path} holds no examples")

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        r = self.rows[i]
        return {"input_ids": r["input_ids"], "labels": r["labels"]}


class PadCollator:
    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, batch: list[dict]) -> dict:
        width = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, b in enumerate(batch):
            n = len(b["input_ids"])
            ids[i, :n] = torch.tensor(b["input_ids"])
            labels[i, :n] = torch.tensor(b["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}
