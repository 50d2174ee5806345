"""GPU-serving artifacts in the compressed-tensors format that vLLM loads: W4A16 and FP8.

- `w4a16`: 4-bit integer weights, symmetric, one scale per group of `group_size` inputs, packed eight
  to an int32 ("pack-quantized"); activations stay bf16. vLLM runs it with its Marlin/Machete
  kernels on GPUs (Ampere and newer).
- `fp8`: e4m3 weights with one scale per output channel, activations quantized per token at run
  time ("float-quantized", the FP8_DYNAMIC scheme); vLLM's FP8 kernels need Ada or Hopper.

W4A16 is calibrated with GPTQ on rows of the run's own training data when they are given
(`gptq.py`; round-to-nearest otherwise, `export.w4a16_method=rtn`); FP8 is round-to-nearest from the
merged bf16 weights (per-channel 8-bit floats lose little). The output layer stays bf16 (the common choice: it is the most sensitive layer). The files are
written by the compressed-tensors library itself (the one vLLM and transformers read), so this
module only chooses the scheme and computes each weight's scales.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

SCHEMES = {"w4a16": ("W4A16", "pack-quantized"), "fp8": ("FP8_DYNAMIC", "float-quantized")}


class QuantizeError(ValueError):
    pass


def _quiet_compressed_tensors() -> None:
    # compressed-tensors logs through loguru, one warning per layer; ours says what matters.
    try:
        from loguru import logger

        logger.disable("compressed_tensors")
    except ImportError:
        logging.getLogger("compressed_tensors").setLevel(logging.ERROR)


def scheme_for(kind: str, group_size: int):
    from compressed_tensors.quantization import preset_name_to_scheme

    preset, _ = SCHEMES[kind]
    scheme = preset_name_to_scheme(preset, ["Linear"])
    if kind == "w4a16":
        scheme.weights.group_size = group_size
    return scheme


def check_group_size(model: torch.nn.Module, group_size: int) -> None:
    """Every quantized layer's input width must split into whole groups (vLLM's kernels require it)."""
    widths = {
        name: m.in_features
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head")
    }
    bad = next((name for name, width in widths.items() if width % group_size), None)
    if bad is not None:
        fits = [g for g in (128, 64, 32) if all(width % g == 0 for width in widths.values())]
        raise QuantizeError(
            f"export.w4a16_group_size={group_size} does not divide the {widths[bad]} inputs "
            f"of {bad}; " + (f"use {fits[0]}" if fits else "no group size in 32/64/128 fits this model")
        )


@torch.no_grad()
def set_round_to_nearest_scales(model: torch.nn.Module) -> int:
    """Each quantized layer's scale from its own weights (min/max per group or per channel)."""
    from compressed_tensors.quantization.utils.helpers import calculate_qparams

    layers = 0
    for module in model.modules():
        scheme = getattr(module, "quantization_scheme", None)
        if scheme is None or scheme.weights is None:
            continue
        args, w = scheme.weights, module.weight.float()
        if args.strategy == "group":
            w = w.reshape(w.shape[0], -1, args.group_size)
            lo, hi = w.amin(-1), w.amax(-1)
        else:
            lo, hi = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
        scale, zero = calculate_qparams(lo, hi, args)
        module.weight_scale.copy_(scale.to(module.weight_scale.dtype))
        module.weight_zero_point.copy_(zero.to(module.weight_zero_point.dtype))
        layers += 1
    return layers


def write_compressed(merged_dir: str | Path, out_dir: str | Path, kind: str, *how, **how_kw) -> dict:
    """Quantize the merged model in `merged_dir` to `kind` and save it (weights, config) in `out_dir`;
    `how` as compress_and_save takes it (group size, GPTQ's calibration rows, clipping)."""
    from transformers import AutoModelForCausalLM

    if kind not in SCHEMES:
        raise QuantizeError(f"export.vllm_quantize: unknown scheme {kind!r} (one of {', '.join(SCHEMES)})")
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.bfloat16)
    info = compress_and_save(model, out_dir, kind, *how, **how_kw)
    return {**info, "quantize_s": time.perf_counter() - t0}


def compress_and_save(
    model: torch.nn.Module,
    out_dir: str | Path,
    kind: str,
    group_size: int = 128,
    calibration: list[list[int]] | None = None,
    clipping: str = "full",
) -> dict:
    """`write_compressed` of a model already loaded, wherever it lives (GPTQ moves it to the GPU if there is one):
    W4A16 with GPTQ on the `calibration` rows (token ids) when given, each group's scale by `clipping`
    (export.w4a16_clipping), else rounded to nearest."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config

    _quiet_compressed_tensors()
    if kind == "w4a16":
        check_group_size(model, group_size)
    scheme = scheme_for(kind, group_size)
    apply_quantization_config(model, QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head"]))
    if kind == "w4a16" and calibration:  # GPTQ chooses the scales itself: no rounding pass first
        from .gptq import quantize_model

        device = "cuda" if torch.cuda.is_available() else "cpu"
        method = quantize_model(model.to(device), calibration, group_size, clipping=clipping)
        layers = method.pop("layers_quantized")
        model.to("cpu")
    else:
        layers = set_round_to_nearest_scales(model)
        method = {"method": "round-to-nearest (no calibration)"}
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=SCHEMES[kind][1])
    compressor.compress_model(model)
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    compressor.update_config(out_dir)
    info = {
        "scheme": SCHEMES[kind][0],
        "format": f"compressed-tensors ({SCHEMES[kind][1]})",
        "layers_quantized": layers,
        "kept_bf16": ["lm_head", "embeddings", "norms"],
        **method,
    }
    if kind == "w4a16":
        info["group_size"] = group_size
    return info


def load_compressed(model_dir: str | Path) -> torch.nn.Module:
    """The artifact as transformers reads it (compressed-tensors' loader, weights decompressed to bf16):
    an independent reader of the files, used for parity."""
    from transformers import AutoModelForCausalLM

    _quiet_compressed_tensors()
    return AutoModelForCausalLM.from_pretrained(model_dir).eval()
