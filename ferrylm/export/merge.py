"""Fold a LoRA adapter into its base model shard by shard, never holding the whole model in memory.

Each safetensors shard of the base is read, every weight the adapter targets gets
W + scale · (B @ A) (computed in fp32, stored in the output dtype), and the shard is written
next to the others with the same names and the same index. Peak memory is about one shard plus
one fp32 weight matrix, so a 7B merge fits in a few GB of RAM instead of the model's 15 GB.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Files of a model directory other than weights that travel with it.
_CARRY = ("config.json", "generation_config.json")


class MergeError(RuntimeError):
    pass


def _adapter(adapter_dir: Path) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], float]:
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text())
    if cfg.get("use_dora") or cfg.get("modules_to_save"):
        raise MergeError(f"{adapter_dir}: DoRA / modules_to_save adapters are not merged by the streaming merge")
    if cfg.get("fan_in_fan_out"):
        raise MergeError(f"{adapter_dir}: fan_in_fan_out adapters are not supported")
    r, alpha = cfg["r"], cfg["lora_alpha"]
    scale = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
    weights = adapter_dir / "adapter_model.safetensors"
    if not weights.is_file():
        raise MergeError(f"{adapter_dir}: no adapter_model.safetensors")
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    with safe_open(str(weights), "pt") as f:
        for key in f.keys():
            for part in ("lora_A", "lora_B"):
                tag = f".{part}.weight"
                if key.endswith(tag):
                    module = key[: -len(tag)].removeprefix("base_model.model.")
                    pairs.setdefault(f"{module}.weight", {})[part] = f.get_tensor(key).float()
    incomplete = [k for k, v in pairs.items() if len(v) != 2]
    if incomplete or not pairs:
        raise MergeError(f"{adapter_dir}: LoRA weights missing or unpaired ({incomplete[:3] or 'none found'})")
    return {k: (v["lora_A"], v["lora_B"]) for k, v in pairs.items()}, scale


def _shards(base_dir: Path) -> tuple[list[str], dict | None]:
    index = base_dir / "model.safetensors.index.json"
    if index.is_file():
        doc = json.loads(index.read_text())
        return sorted(set(doc["weight_map"].values())), doc
    if (base_dir / "model.safetensors").is_file():
        return ["model.safetensors"], None
    raise MergeError(f"{base_dir}: no safetensors weights (model.safetensors or an index)")


def stream_merge(
    base_dir: str | Path, adapter_dir: str | Path | None, out_dir: str | Path, dtype: str = "auto"
) -> dict:
    """Write the merged model's weights and config into `out_dir`; returns what was merged. With no
    adapter (a full fine-tune) the shards are copied, cast to `dtype`, the same way."""
    base_dir, out_dir = Path(base_dir), Path(out_dir)
    lora, scale = _adapter(Path(adapter_dir)) if adapter_dir is not None else ({}, None)
    shards, index = _shards(base_dir)
    config = json.loads((base_dir / "config.json").read_text())
    out_dtype = _DTYPES.get(dtype) if dtype != "auto" else None
    out_dir.mkdir(parents=True, exist_ok=True)
    merged, max_delta = set(), 0.0
    for shard in shards:
        tensors = {}
        with safe_open(str(base_dir / shard), "pt") as f:
            metadata = f.metadata() or {}
            for key in f.keys():
                w = f.get_tensor(key)
                target = out_dtype or w.dtype
                if key in lora:
                    a, b = lora[key]
                    delta = (b @ a) * scale
                    if delta.shape != w.shape:
                        raise MergeError(
                            f"{key}: adapter delta {tuple(delta.shape)} does not fit weight {tuple(w.shape)}"
                        )
                    max_delta = max(max_delta, delta.abs().max().item())
                    w = (w.float() + delta).to(target)
                    merged.add(key)
                elif w.is_floating_point():
                    w = w.to(target)
                tensors[key] = w.contiguous()
        save_file(tensors, str(out_dir / shard), metadata={**metadata, "format": "pt"})
        del tensors
    missing = sorted(set(lora) - merged)
    if missing:
        raise MergeError(f"the adapter targets weights the base does not have: {missing[:3]}")
    if index is not None:
        (out_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    for name in _CARRY:
        if (base_dir / name).is_file():
            shutil.copy(base_dir / name, out_dir / name)
    if out_dtype is not None:
        config["dtype"] = config["torch_dtype"] = dtype
        (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    return {
        "weights_merged": len(merged),
        "shards": len(shards),
        "scale": scale,
        "max_abs_delta": max_delta,
        "dtype": dtype if out_dtype is not None else str(config.get("dtype") or config.get("torch_dtype")),
    }
