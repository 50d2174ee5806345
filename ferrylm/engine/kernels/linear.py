"""The engine's kernel-backed linear layers: `GemvLinear` (bf16 weights, `gemv.py`) and `Gemv4Linear`
(4-bit, `gemv4.py`). Both reach their kernel through one torch custom op, so `torch.compile` captures
either in the engine's CUDA graph like any other kernel; the op's arguments are flat (its schema takes
no NamedTuple), the epilogue's fields among them.
"""

from __future__ import annotations

import inspect

import torch

from .gemv import CONFIG_KEYS, SILU, Epilogue, Launch, gemv
from .gemv4 import dequantize, gemv4, pack_int4, prompt4


def _matvec(
    x: torch.Tensor,
    w: torch.Tensor,
    scales: torch.Tensor | None,
    norm_weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    pos: torch.Tensor | None,
    inv_freq: torch.Tensor | None,
    group: int,
    block_n: int,
    block_k: int,
    num_warps: int,
    num_stages: int,
    pdl: bool,
    norm_eps: float | None,
    pair: int,
    period: int,
    rope_rows: int,
    rope_scale: float,
    has_residual: bool,
    sub: int,
    ahead: int,
) -> torch.Tensor:
    """One token's product: `gemv` on bf16 w (scales None), else `gemv4` on w packed by `pack_int4`."""
    e = Epilogue(norm_eps, pair, period, rope_rows, rope_scale, has_residual)
    launch = Launch(block_n, block_k, num_warps, num_stages, pdl)
    if scales is None:
        return gemv(x, w, bias, launch, e, residual, pos, inv_freq)
    return gemv4(x, w, scales, group, bias, launch, e, norm_weight, residual, pos, inv_freq, sub, ahead)


matvec_op = torch.library.custom_op("ferrylm::matvec", _matvec, mutates_args=())
_NAMES = tuple(inspect.signature(_matvec).parameters)


@matvec_op.register_fake
def _(*args):
    a = dict(zip(_NAMES, args))  # the op passes every argument, in its schema's order
    w = a["w"]
    n = w.shape[0] if a["scales"] is None else w.shape[0] * w.shape[2]
    return a["x"].new_empty(n // 2 if a["pair"] == SILU else n)


class _KernelLinear(torch.nn.Module):
    """What both layers share: a configuration (`configure`) and `step`, the kernel with the layer's
    epilogue (the fused one-token step of `decode_step.py`); `_weights` says what the op reads."""

    cfg: dict | None = None
    pdl: bool = False
    epilogue: Epilogue = Epilogue()

    def _weights(self) -> tuple:  # (w, scales, norm_weight, group)
        raise NotImplementedError

    def configure(self, cfg: dict, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> None:
        self.cfg = {key: int(cfg[key]) for key in CONFIG_KEYS}
        self.cfg |= {"sub": int(cfg.get("sub", 1)), "ahead": int(cfg.get("ahead", 1))}
        self.pdl, self.epilogue = pdl, epilogue

    def step(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None = None,
        pos: torch.Tensor | None = None,
        inv_freq: torch.Tensor | None = None,
        plain: bool = False,
    ) -> torch.Tensor:
        w, scales, norm_weight, group = self._weights()
        e = Epilogue() if plain else self.epilogue
        tensors = (x, w, scales, norm_weight, self.bias, residual, pos, inv_freq)
        return matvec_op(*tensors, group, pdl=self.pdl, **e.op_args(), **self.cfg)


class GemvLinear(_KernelLinear):
    """A linear layer whose one-token inputs go through `gemv` with a fixed configuration; longer
    inputs (the prompt) through F.linear."""

    def __init__(self, linear: torch.nn.Linear, cfg: dict, pdl: bool = False, epilogue: Epilogue = Epilogue()):
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias
        self.configure(cfg, pdl, epilogue)

    def _weights(self) -> tuple:
        return self.weight, None, None, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[:-1].numel() != 1:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        return self.step(x.reshape(-1), plain=True).reshape(*x.shape[:-1], -1)


class Gemv4Linear(_KernelLinear):
    """A 4-bit linear layer (the integers q [N, K] in [-8, 7] and scales [N, K/group] of
    `int4.round_to_nearest_int4` or of the export's W4A16 artifact): one-token inputs through `gemv4`
    once `configure`d, longer ones through F.linear on the dequantized weight. `norm_weight` (set by
    `decode_step.fold_norms`) multiplies the input first."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, group_size: int):
        super().__init__()
        self.out_features, self.in_features = q.shape
        self.group_size = group_size
        packed, scales = pack_int4(q, scale)
        self.register_buffer("packed", packed)
        self.register_buffer("scales", scales)
        self.register_buffer("norm_weight", None)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach(), requires_grad=False)

    def _weights(self) -> tuple:
        return self.packed, self.scales, self.norm_weight, self.group_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[:-1].numel() == 1 and self.cfg is not None:
            return self.step(x.reshape(-1), plain=True).reshape(*x.shape[:-1], -1)
        if self.norm_weight is not None:
            x = self.norm_weight * x  # transformers' order: the weight times the normalised input
        if x.is_cuda and x.dtype == torch.bfloat16 and self.group_size >= 16:  # the tensor cores, in registers
            y = prompt4(x.reshape(-1, self.in_features), self.packed, self.scales, self.group_size)
            y = y if self.bias is None else y + self.bias.float()
            return y.to(x.dtype).reshape(*x.shape[:-1], -1)
        # In fp32, as the kernels compute: q * scale needs more bits than bf16 has, and rounding the
        # dequantized weight to bf16 changed greedy tokens of SmolLM2 within 24.
        w = dequantize(self.packed, self.scales, self.group_size)
        bias = None if self.bias is None else self.bias.float()
        return torch.nn.functional.linear(x.float(), w, bias).to(x.dtype)
