"""LoRA on an FP8 base (`train.base_precision=fp8`): the frozen linear weights in float8 (e4m3) with
one scale per output channel, their products through `torch._scaled_mm`; the adapters, activations
between layers and every gradient stay in the training precision.

A LoRA step spends most of its arithmetic in the frozen base's products: the forward, its recompute
under checkpointing, and the input gradient in backward (the base has no weight gradient). Each runs
here as an FP8 product with row-wise scales (Hopper and Ada GPUs run these at twice the bf16 rate):

- forward: y = x W^T, x quantized per row (its own scale per token), W per output channel;
- backward: dx = dy W = (dy * s_w) W_q: the weight's scales are folded into dy's columns first, then dy
  is quantized per row. That product needs W_q laid out the other way, so the weight is kept twice (in
  both layouts): two bytes a parameter, as bf16, so memory does not fall; speed is the point.

Rounding both operands to e4m3 (3 mantissa bits) is not exact: the loss curve against bf16 is in
docs/performance.md, and tests/train/test_fp8.py holds it on the tiny model. On a CPU torch emulates
the products (slower than fp32: for tests); CUDA GPUs before compute capability 8.9 have no FP8.
"""

from __future__ import annotations

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = torch.finfo(E4M3).max


def quantize_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """t [M, K] as e4m3 with one fp32 scale per row ([M, 1]): t ≈ q * scale."""
    scale = t.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / E4M3_MAX
    return (t.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3), scale


def _product(a: torch.Tensor, b_t: torch.Tensor, scale_a, scale_b, out_dtype) -> torch.Tensor:
    """a [M, K] (e4m3, row scales) times b_t [K, N] (e4m3, column-major, column scales [1, N]), with M
    padded to a multiple of 16 on a GPU (its FP8 kernels need it)."""
    m = a.shape[0]
    pad = (-m) % 16 if a.is_cuda else 0
    if pad:
        a = torch.cat([a, a.new_zeros(pad, a.shape[1])])
        scale_a = torch.cat([scale_a, scale_a.new_ones(pad, 1)])
    out = torch._scaled_mm(a, b_t, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
    return (out[:m] if pad else out).to(out_dtype)


class _Fp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_q, w_t_q, w_scale, ones_in):
        ctx.save_for_backward(w_t_q, w_scale, ones_in)
        x2 = x.reshape(-1, x.shape[-1])
        xq, xs = quantize_rows(x2)
        y = _product(xq, w_q.t(), xs, w_scale.view(1, -1), x.dtype)
        return y.view(*x.shape[:-1], w_q.shape[0])

    @staticmethod
    def backward(ctx, grad):
        w_t_q, w_scale, ones_in = ctx.saved_tensors
        g2 = grad.reshape(-1, grad.shape[-1]).float() * w_scale.view(1, -1)
        gq, gs = quantize_rows(g2)
        gx = _product(gq, w_t_q.t(), gs, ones_in, grad.dtype)
        return gx.view(*grad.shape[:-1], w_t_q.shape[0]), None, None, None, None


class Fp8BaseLinear(torch.nn.Module):
    """A frozen linear layer in FP8 (see the module's docstring); the bias, if any, stays as it was."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        w = linear.weight.detach()
        scale = w.abs().amax(dim=1).float().clamp(min=1e-12) / E4M3_MAX
        w_q = (w.float() / scale[:, None]).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
        # Buffers, not parameters: nothing trains them, and no checkpoint or adapter file holds them.
        # The weight stays a (frozen) parameter, so parameter counts (the log, MFU) still see it; the
        # other layout and the scales are buffers. Neither is in a checkpoint: those hold the adapter.
        self.weight = torch.nn.Parameter(w_q, requires_grad=False)
        self.register_buffer("w_t_q", w_q.t().contiguous(), persistent=False)
        self.register_buffer("w_scale", scale, persistent=False)
        self.register_buffer("ones_in", torch.ones(1, self.in_features, device=w.device), persistent=False)
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _Fp8Linear.apply(x, self.weight, self.w_t_q, self.w_scale, self.ones_in)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, fp8 e4m3, per-channel scales"


def fp8_unsupported_reason(device: torch.device) -> str | None:
    """Why FP8 products cannot run on this device, or None."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 9):
        name = torch.cuda.get_device_name(device)
        return f"{name} has no FP8 matrix products (compute capability 8.9 or newer: Ada, Hopper and later)"
    return None


def fp8_base(model) -> int:
    """Give every LoRA layer of a PEFT model an FP8 base layer (dimensions that are multiples of 16);
    returns how many were converted. The bf16 weights are freed as each layer is converted."""
    count = 0
    for module in model.modules():
        base = getattr(module, "base_layer", None)
        if isinstance(base, torch.nn.Linear) and base.in_features % 16 == 0 and base.out_features % 16 == 0:
            module.base_layer = Fp8BaseLinear(base)
            count += 1
    return count
