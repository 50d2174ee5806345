"""Streaming LoRA merge of a Qwen2.5-7B-shaped model on CPU: wall time and peak RSS.

    .venv/bin/python benchmarks/merge_7b.py --work /var/tmp/ferrylm-merge7b

Writes (once) a random bf16 model with Qwen2.5-7B's exact shapes as ~4 GB safetensors shards —
tensor by tensor, never the whole model in memory — and a random LoRA adapter (r 16, all linear
layers, PEFT's file format), then runs `ferrylm.export.merge.stream_merge` in a child process and
reports its wall time and peak resident memory; spot-checks a merged weight against W + s·B@A.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from ferrylm.shapes import HEAD_DIM, KV_HEADS, LAYERS, VOCAB
from ferrylm.shapes import HIDDEN as H
from ferrylm.shapes import INTERMEDIATE as INTER

REPO = Path(__file__).resolve().parents[1]
KV = KV_HEADS * HEAD_DIM
LINEAR = {
    "self_attn.q_proj": (H, H),
    "self_attn.k_proj": (KV, H),
    "self_attn.v_proj": (KV, H),
    "self_attn.o_proj": (H, H),
    "mlp.gate_proj": (INTER, H),
    "mlp.up_proj": (INTER, H),
    "mlp.down_proj": (H, INTER),
}


def shapes() -> list[tuple[str, tuple[int, ...]]]:
    out = [("model.embed_tokens.weight", (VOCAB, H))]
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for name, shape in LINEAR.items():
            out.append((p + name + ".weight", shape))
            if name.split(".")[1] in ("q_proj", "k_proj", "v_proj"):
                out.append((p + name + ".bias", (shape[0],)))
        out += [(p + "input_layernorm.weight", (H,)), (p + "post_attention_layernorm.weight", (H,))]
    return out + [("model.norm.weight", (H,)), ("lm_head.weight", (VOCAB, H))]


def write_base(d: Path, shard_bytes: int = 4 << 30) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen2Config

    if (d / "model.safetensors.index.json").is_file():
        return
    d.mkdir(parents=True, exist_ok=True)
    Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=H,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=28,
        num_key_value_heads=4,
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    ).to_json_file(d / "config.json")
    g = torch.Generator().manual_seed(0)
    groups, cur, size = [], [], 0
    for name, shape in shapes():
        n = 2 * int(torch.tensor(shape).prod())
        if cur and size + n > shard_bytes:
            groups.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += n
    groups.append(cur)
    weight_map, total = {}, 0
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        tensors = {name: (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16) for name, shape in group}
        save_file(tensors, str(d / fname), metadata={"format": "pt"})
        total += sum(t.numel() * 2 for t in tensors.values())
        weight_map.update({name: fname for name in tensors})
        del tensors
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )


def write_adapter(d: Path, r: int = 16) -> None:
    import torch
    from safetensors.torch import save_file

    if (d / "adapter_model.safetensors").is_file():
        return
    d.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    tensors = {}
    for i in range(LAYERS):
        for name, (out_f, in_f) in LINEAR.items():
            key = f"base_model.model.model.layers.{i}.{name}"
            tensors[f"{key}.lora_A.weight"] = torch.randn(r, in_f, generator=g) * 0.01
            tensors[f"{key}.lora_B.weight"] = torch.randn(out_f, r, generator=g) * 0.01
    save_file(tensors, str(d / "adapter_model.safetensors"))
    (d / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "r": r,
                "lora_alpha": 32,
                "target_modules": sorted({n.split(".")[1] for n in LINEAR}),
                "use_rslora": False,
                "use_dora": False,
                "fan_in_fan_out": False,
                "task_type": "CAUSAL_LM",
            }
        )
    )


def child(base: str, adapter: str, out: str, dtype: str) -> None:
    from ferrylm.export.merge import stream_merge

    t0 = time.perf_counter()
    info = stream_merge(base, adapter, out, dtype)
    info["merge_s"] = time.perf_counter() - t0
    info["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(info))


def spot_check(base: Path, adapter: Path, merged: Path) -> float:
    import torch
    from safetensors import safe_open

    key = "model.layers.27.mlp.down_proj.weight"
    index = json.loads((base / "model.safetensors.index.json").read_text())["weight_map"]
    with safe_open(str(base / index[key]), "pt") as f:
        w = f.get_tensor(key).float()
    with safe_open(str(adapter / "adapter_model.safetensors"), "pt") as f:
        a = f.get_tensor("base_model.model.model.layers.27.mlp.down_proj.lora_A.weight")
        b = f.get_tensor("base_model.model.model.layers.27.mlp.down_proj.lora_B.weight")
    with safe_open(str(merged / index[key]), "pt") as f:
        m = f.get_tensor(key).float()
    want = (w + (b @ a) * 2.0).to(torch.bfloat16).float()
    return (m - want).abs().max().item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/var/tmp/ferrylm-merge7b")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child)
    work = Path(args.work)
    t0 = time.perf_counter()
    write_base(work / "base")
    write_adapter(work / "adapter")
    prep = time.perf_counter() - t0
    import shutil

    shutil.rmtree(work / "merged", ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            str(work / "base"),
            str(work / "adapter"),
            str(work / "merged"),
            args.dtype,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - t0
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    info.update(
        command=" ".join(sys.argv),
        wall_s_with_interpreter=wall,
        prepare_s=prep,
        base_gib=sum(p.stat().st_size for p in (work / "base").glob("*.safetensors")) / 2**30,
        spot_check_max_abs_diff=spot_check(work / "base", work / "adapter", work / "merged"),
    )
    out = REPO / "bench" / "results" / "merge_7b.json"
    out.write_text(json.dumps(info, indent=2))
    print(json.dumps(info, indent=2))
    shutil.rmtree(work / "merged", ignore_errors=True)


if __name__ == "__main__":
    main()
