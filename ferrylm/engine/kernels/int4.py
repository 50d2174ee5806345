"""Weight-only 4-bit linear layers for the batch-1 engine, on torch's own int4 kernels.

The W4A16 artifact the export stage writes (compressed-tensors, symmetric, one scale per group of
inputs) is what vLLM serves on GPUs with its Marlin kernels. Where vLLM is not available, the
engine runs the same integers and scales through torch's tinygemm kernel
(`aten._weight_int4pack_mm`, CUDA; `_weight_int4pack_mm_for_cpu` on CPU): a 4-bit weight costs a
quarter of the bytes of bf16 to read, and at batch 1 bytes are the time.

tinygemm dequantizes `(u - 8) * scale + zero` with `u` in [0, 15]; a symmetric value `q` in [-8, 7]
is `u = q + 8` with zero 0.
"""

from __future__ import annotations

from pathlib import Path

import torch


def round_to_nearest_int4(weight: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric 4-bit: (q int8 in [-8, 7] [out, in], scale [out, in/group]); compressed-tensors' formula
    (scale = group max |w| / 7.5), so the result equals the export stage's W4A16 artifact."""
    out_f, in_f = weight.shape
    w = weight.reshape(out_f, in_f // group_size, group_size)
    scale = w.float().abs().amax(-1) / 7.5
    scale = torch.where(scale == 0, torch.finfo(torch.float32).eps, scale).to(weight.dtype)
    # Divided in the weight's dtype, as compressed-tensors does, so the integers are the artifact's.
    q = torch.clamp(torch.round(w / scale[..., None]), -8, 7).to(torch.int8)
    return q.reshape(out_f, in_f), scale


class Int4WeightLinear(torch.nn.Module):
    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, group_size: int):
        super().__init__()
        self.out_features, self.in_features = q.shape
        self.group_size = group_size
        # The kernel tiles the inputs by inner_k_tiles * 16; the largest tiling that divides them.
        inner_k_tiles = next((t for t in (8, 4, 2) if self.in_features % (t * 16) == 0), None)
        if inner_k_tiles is None or group_size not in (32, 64, 128, 256):
            raise ValueError(
                f"int4 kernel: {self.in_features} inputs / group {group_size} are not supported "
                "(inputs must be a multiple of 32, group one of 32, 64, 128, 256)"
            )
        u = q.to(torch.int32) + 8
        if q.device.type == "cuda":
            packed = ((u[:, ::2] << 4) | u[:, 1::2]).to(torch.uint8)
            w = torch.ops.aten._convert_weight_to_int4pack(packed.contiguous(), inner_k_tiles)
        else:
            w = torch.ops.aten._convert_weight_to_int4pack_for_cpu(u.contiguous(), inner_k_tiles)
        self.register_buffer("weight_int4", w)
        s = scale.t().to(torch.bfloat16)
        self.register_buffer("scales_and_zeros", torch.stack([s, torch.zeros_like(s)], -1).contiguous())
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach().to(torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).to(torch.bfloat16)
        mm = torch.ops.aten._weight_int4pack_mm if x.is_cuda else torch.ops.aten._weight_int4pack_mm_for_cpu
        out = mm(x2, self.weight_int4, self.group_size, self.scales_and_zeros)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*shape[:-1], self.out_features).to(x.dtype)


def int4_weights(decoder: torch.nn.Module, group_size: int, make=None) -> int:
    """Replace every linear layer of the fused decoder's layers (not the output layer) with a
    round-to-nearest 4-bit one, `make(q, scale, bias, group_size)` (default Int4WeightLinear; the
    Triton kernel's is linear.Gemv4Linear); returns how many."""
    from ..fused import layer_linears

    make = make or Int4WeightLinear
    replaced = layer_linears(decoder)
    for layer, name in replaced:
        child = getattr(layer, name)
        q, scale = round_to_nearest_int4(child.weight.detach(), group_size)
        setattr(layer, name, make(q, scale, child.bias, group_size))
    return len(replaced)


def read_w4a16(model_dir: str | Path) -> dict[str, tuple[torch.Tensor, torch.Tensor, int]]:
    """The export stage's W4A16 artifact as {linear name: (q int8, scale, group size)}, unpacked with
    compressed-tensors' own helper (the integers and scales the artifact holds, nothing re-rounded)."""
    import json

    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from safetensors.torch import load_file

    config = json.loads((Path(model_dir) / "config.json").read_text())["quantization_config"]
    group = config["config_groups"]["group_0"]["weights"]["group_size"]
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(Path(model_dir).glob("*.safetensors")):
        tensors.update(load_file(shard))
    out = {}
    for key, packed in tensors.items():
        if key.endswith(".weight_packed"):
            name = key[: -len(".weight_packed")]
            shape = torch.Size(tensors[f"{name}.weight_shape"].tolist())
            out[name] = (unpack_from_int32(packed, 4, shape), tensors[f"{name}.weight_scale"], group)
    return out


def int4_from_w4a16(decoder: torch.nn.Module, model_dir: str | Path, make=None) -> int:
    """Give the fused decoder the artifact's own 4-bit weights (q/k/v and gate/up concatenated by rows,
    as the fused layers are) as `make` layers (see int4_weights); returns how many were replaced."""
    from ..fused import FUSED_FROM

    make = make or Int4WeightLinear
    art = read_w4a16(model_dir)
    count = 0
    for i, layer in enumerate(decoder.layers):
        for name, sources in FUSED_FROM.items():
            found = [art[f"model.layers.{i}.{s}"] for s in sources]
            q = torch.cat([f[0] for f in found]).to(layer.norm_in.device)
            scale = torch.cat([f[1] for f in found]).to(layer.norm_in.device)
            old = getattr(layer, name)
            setattr(layer, name, make(q, scale, old.bias, found[0][2]))
            count += 1
    return count
