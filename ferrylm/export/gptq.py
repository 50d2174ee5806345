"""Calibrated 4-bit weights (GPTQ) for the W4A16 artifact.

Round-to-nearest rounds each weight on its own; on the real SmolLM2 weights that left greedy tokens
agreeing with the trained model on 22 % of positions, below the export's gate. GPTQ (Frantar et al.,
2022) quantizes a layer's weight one input column at a time and spreads each column's rounding error
over the columns not yet quantized, weighted by the inverse Hessian H = 2·XᵀX of the layer's inputs
on calibration text, so the layer's *outputs* on that text move as little as possible. Each group's
scale is chosen from a few clipping ratios by the same input-weighted error, before its columns are
quantized. Layers go in order, each calibrated on the outputs of the layers already quantized.

The result is exactly the compressed-tensors W4A16 layout (4-bit symmetric integers, one scale per
group of inputs): `quantize_model` leaves each linear's weight equal to q·scale and sets its
`weight_scale`, and the compressor packs those integers unchanged.
"""

from __future__ import annotations

import copy
import math

import torch

CLIP_RATIOS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75)
QMIN, QMAX = -8, 7


def _scales(w: torch.Tensor, hdiag: torch.Tensor, dtype: torch.dtype, ratios=CLIP_RATIOS) -> torch.Tensor:
    """Per-row scale for one group of columns `w` [rows, group]: the clipping ratio whose rounding error,
    weighted by the inputs' energy per column (diag H), is least. Scales are rounded to the artifact's
    dtype first, so q·scale is what the file will hold."""
    absmax = w.abs().amax(1).clamp(min=1e-8)
    best, best_err = None, None
    for ratio in ratios:
        scale = (absmax * ratio / ((QMAX - QMIN) / 2)).to(dtype).float().clamp(min=1e-10)
        q = torch.clamp(torch.round(w / scale[:, None]), QMIN, QMAX) * scale[:, None]
        err = ((q - w) ** 2 * hdiag).sum(1)
        if best is None:
            best, best_err = scale, err
        else:
            better = err < best_err
            best, best_err = torch.where(better, scale, best), torch.where(better, err, best_err)
    return best


@torch.no_grad()
def gptq_weight(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    group_size: int,
    dtype: torch.dtype,
    damp: float = 0.01,
    block: int = 128,
    ratios: tuple[float, ...] = CLIP_RATIOS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dequantized weight q·scale [rows, cols] in fp32, scales [rows, cols // group_size]).

    Columns are quantized in order of decreasing input energy (diag H: "act-order"), so the columns
    that matter most are rounded while the most columns remain to absorb their error. Groups stay
    the artifact's contiguous runs of inputs, so each group's scale is chosen up front from the
    weights as trained ("static groups"): the file needs no permutation index."""
    W = weight.float().clone()
    H = hessian.float().clone()
    rows, cols = W.shape
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    hdiag = torch.diag(H).clone()
    scales = torch.stack(
        [
            _scales(W[:, g : g + group_size], hdiag[g : g + group_size], dtype, ratios)
            for g in range(0, cols, group_size)
        ],
        1,
    )
    col_scale = scales.repeat_interleave(group_size, 1)
    perm = torch.argsort(hdiag, descending=True)
    W, H, col_scale = W[:, perm], H[perm][:, perm], col_scale[:, perm]
    H += damp * torch.mean(torch.diag(H)) * torch.eye(cols, device=H.device)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    Q = torch.zeros_like(W)
    for i1 in range(0, cols, block):
        i2 = min(i1 + block, cols)
        W1, Err = W[:, i1:i2].clone(), torch.zeros(rows, i2 - i1, device=W.device)
        Hinv1 = Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            w, scale = W1[:, i], col_scale[:, i1 + i]
            q = torch.clamp(torch.round(w / scale), QMIN, QMAX) * scale
            Q[:, i1 + i] = q
            err = (w - q) / Hinv1[i, i]
            W1[:, i:] -= err[:, None] * Hinv1[i, i:][None, :]
            Err[:, i] = err
        W[:, i2:] -= Err @ Hinv[i1:i2, i2:]
    return Q[:, torch.argsort(perm)], scales


class _Inputs(Exception):
    """Raised by the first decoder layer's hook once it has seen its inputs: nothing after it runs."""


def _layer_inputs(model, layers, rows: list[list[int]], device) -> list[tuple]:
    """Each calibration row's (hidden states, keyword arguments) as the first decoder layer receives them."""
    seen = []

    def catch(module, args, kwargs):
        seen.append((args[0] if args else kwargs.pop("hidden_states"), kwargs))
        raise _Inputs

    handle = layers[0].register_forward_pre_hook(catch, with_kwargs=True)
    try:
        for ids in rows:
            try:
                model(input_ids=torch.tensor([ids], device=device), use_cache=False)
            except _Inputs:
                pass
    finally:
        handle.remove()
    return [
        (h, {k: v for k, v in kw.items() if k not in ("hidden_states", "past_key_values", "past_key_value")})
        for h, kw in seen
    ]


def _hessians(layer, inputs: list[tuple]) -> dict[str, torch.Tensor]:
    """2·XᵀX / n of every linear's input over the calibration rows, from one pass through `layer`."""
    sums, counts, handles = {}, {}, []

    def add(name):
        def hook(module, args):
            x = args[0].reshape(-1, args[0].shape[-1]).float()
            sums[name] = sums.get(name, 0) + 2 * x.T @ x
            counts[name] = counts.get(name, 0) + x.shape[0]

        return hook

    for name, module in layer.named_modules():
        if isinstance(module, torch.nn.Linear):
            handles.append(module.register_forward_pre_hook(add(name)))
    try:
        for hidden, kwargs in inputs:
            layer(hidden, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return {name: sums[name] / counts[name] for name in sums}


def _outputs(layer, inputs: list[tuple]) -> list[tuple]:
    out = []
    for hidden, kwargs in inputs:
        y = layer(hidden, **kwargs)
        out.append((y[0] if isinstance(y, tuple) else y, kwargs))
    return out


def _cast(value, dtype: torch.dtype | None):
    if dtype is None:
        return value
    if torch.is_tensor(value) and value.is_floating_point():
        return value.to(dtype)
    return tuple(_cast(v, dtype) for v in value) if isinstance(value, tuple) else value


def _computing(layer, dtype: torch.dtype | None):
    """`layer` itself, or a copy of it in `dtype` for the calibration passes (the weights stay as they are)."""
    return layer if dtype is None else copy.deepcopy(layer).to(dtype)


@torch.no_grad()
def quantize_model(model, rows: list[list[int]], group_size: int, log=None, clipping: str = "full") -> dict:
    """GPTQ every linear of every decoder layer of `model` in place (weights become q·scale, each
    module's `weight_scale` is set); the output layer is left alone. Returns what the manifest says.
    On a CPU the calibration passes run in fp32: most CPUs have no bf16 arithmetic and emulate it many
    times slower (the weights, scales and artifact are the same dtypes either way). `clipping`: "search"
    chooses each group's scale among CLIP_RATIOS, "full" takes its largest weight."""
    ratios = CLIP_RATIOS if clipping == "search" else (1.0,)
    layers = model.model.layers
    device = next(model.parameters()).device
    dtype = torch.float32 if device.type == "cpu" else None
    quantized = [m for m in model.modules() if getattr(m, "quantization_scheme", None) is not None]
    for m in quantized:  # compressed-tensors would fake-quantize with scales not chosen yet
        m.quantization_enabled = False
    inputs = [
        (_cast(h, dtype), {k: _cast(v, dtype) for k, v in kw.items()})
        for h, kw in _layer_inputs(model, layers, rows, device)
    ]
    worst, quantized_layers = 0.0, 0
    for index, layer in enumerate(layers):
        hessians = _hessians(_computing(layer, dtype), inputs)
        modules = {
            name: m
            for name, m in layer.named_modules()
            if name in hessians and getattr(m, "quantization_scheme", None) is not None
        }
        for names in _sharing_inputs(hessians, modules):
            together = [modules[n] for n in names]
            worst = max(worst, _quantize_together(together, hessians[names[0]], group_size, ratios))
            quantized_layers += len(names)
        inputs = _outputs(_computing(layer, dtype), inputs)
        if log:
            log.info("gptq: layer %d/%d quantized", index + 1, len(layers))
    for m in quantized:
        m.quantization_enabled = True
    return {
        "method": "GPTQ (calibrated; "
        + (
            "per-group clipping chosen by input-weighted error)" if clipping == "search" else "each group's full range)"
        ),
        "calibration_rows": len(rows),
        "calibration_tokens": sum(map(len, rows)),
        "worst_layer_output_error": worst,
        "layers_quantized": quantized_layers,
    }


def _sharing_inputs(hessians: dict[str, torch.Tensor], names) -> list[list[str]]:
    """The linears that read the same input (q, k, v; gate, up): the same Hessian, bit for bit."""
    groups: list[list[str]] = []
    for name in names:
        same = next((g for g in groups if torch.equal(hessians[g[0]], hessians[name])), None)
        if same:
            same.append(name)
        else:
            groups.append([name])
    return groups


def _quantize_together(modules: list, hessian: torch.Tensor, group_size: int, ratios=CLIP_RATIOS) -> float:
    """GPTQ on the rows of several linears stacked: GPTQ treats rows independently under one Hessian,
    so this is each one quantized alone, in one pass over the columns. Returns the worst output error."""
    sizes = [m.weight.shape[0] for m in modules]
    dtype = modules[0].weight_scale.dtype
    q, scales = gptq_weight(torch.cat([m.weight for m in modules]), hessian, group_size, dtype, ratios=ratios)
    worst = 0.0
    for module, mq, ms in zip(modules, q.split(sizes), scales.split(sizes)):
        worst = max(worst, _relative_error(module.weight.float(), mq, hessian))
        module.weight.copy_(mq.to(module.weight.dtype))
        module.weight_scale.copy_(ms.to(module.weight_scale.dtype).reshape(module.weight_scale.shape))
        module.weight_zero_point.zero_()
    return worst


def _relative_error(w: torch.Tensor, q: torch.Tensor, hessian: torch.Tensor) -> float:
    """‖(W − Q)X‖ / ‖WX‖ over the calibration inputs, from H (the number GPTQ makes small)."""
    d = w - q
    num = torch.einsum("ij,jk,ik->", d, hessian, d).clamp(min=0)
    den = torch.einsum("ij,jk,ik->", w, hessian, w).clamp(min=1e-30)
    return math.sqrt((num / den).item())
