"""The batch-1 matrix-vector kernel for 4-bit weights (W4A16): the export's integers and group scales
read as packed nibbles and dequantized in registers, with the same epilogues as the bf16 kernel of
`gemv.py`, so `decode_step.py` runs a 4-bit model's one-token step in the same few kernels.

At one token a 4-bit weight is a quarter of the bf16 bytes; torch's int4 kernel (`int4.py`) is a
general matrix product that does not reach that floor at batch 1 (docs/benchmarks.md, "GPU: batch-1
decode"). Here each program owns `block_n` rows and reads `block_k / 8` 32-bit words of each per step
(the export's bytes as they lie: eight values a word, column 8w + j in bits 4j..4j+3). The j-th
values of a tile's words multiply x at the columns 8w + j, read from x with a stride of 8, so no value
changes threads; each group of `group` columns is summed and its sum scaled once. The nibbles become
floats without an integer-to-float conversion (`_nibble`).

The RMS norm before q/k/v and gate/up cannot be folded into integers already rounded: the kernel
multiplies x by the norm's weight as it reads it instead (`norm_weight`), and scales by 1/rms(x) at
the end as the bf16 kernel does. Longer inputs (the prompt) go through F.linear on the dequantized
weight.
"""
from __future__ import annotations

from typing import Optional

import torch

from .gemv import CONFIG_KEYS, Epilogue, SILU, candidates, check_launch, fastest, gemv_reference, tuning_inputs

try:
    import triton
    import triton.language as tl

    from .gemv import _epilogue, _rows
except ImportError:  # the CPU-only install: Gemv4Linear is never built there
    triton = None

if triton is not None:
    @triton.jit
    def _tile4(w_ptrs, s_ptrs, k, K: tl.constexpr, GROUP: tl.constexpr, BLOCK_K: tl.constexpr,
               EVEN_K: tl.constexpr):
        """The packed words [BLOCK_N, BLOCK_K/GROUP, GROUP/8] and group scales [BLOCK_N, BLOCK_K/GROUP]
        at column k (eight values a 32-bit word, column 8w + j in bits 4j..4j+3)."""
        if EVEN_K:
            p = tl.load(w_ptrs + k // 8)
            s = tl.load(s_ptrs + k // GROUP)
        else:
            g = tl.arange(0, BLOCK_K // GROUP)
            inside = k // GROUP + g < K // GROUP
            p = tl.load(w_ptrs + k // 8, mask=inside[None, :, None], other=0)
            s = tl.load(s_ptrs + k // GROUP, mask=inside[None, :], other=0.0)
        return p, s

    @triton.jit
    def _x4(x_ptr, g_ptr, cols, k, j: tl.constexpr, K: tl.constexpr, HAS_G: tl.constexpr, EVEN_K: tl.constexpr):
        """x at the columns of each word's j-th value (cols [BLOCK_K/GROUP, GROUP/8]: each word's
        first column), as read (for the norm's sum of squares) and times the norm's weight."""
        at = k + cols + j
        if EVEN_K:
            x = tl.load(x_ptr + at).to(tl.float32)
        else:
            x = tl.load(x_ptr + at, mask=at < K, other=0.0).to(tl.float32)
        xg = x
        if HAS_G:
            if EVEN_K:
                xg = x * tl.load(g_ptr + at).to(tl.float32)
            else:
                xg = x * tl.load(g_ptr + at, mask=at < K, other=0.0).to(tl.float32)
        return x, xg

    @triton.jit
    def _nibble(p, j: tl.constexpr):
        """The j-th 4-bit value of each word as fp32 in [-8, 7]: its bits put under the mantissa of
        2^23 and 2^23 + 8 taken off, two integer operations and one add, no integer-to-float
        conversion (a quarter-rate instruction, which bound the first version of this kernel)."""
        bits = ((p >> (4 * j)) & 15) | 0x4B000000
        return bits.to(tl.float32, bitcast=True) - 8388616.0

    @triton.jit
    def _step4(pa, sa, pb, sb, x_ptr, g_ptr, cols, k, K: tl.constexpr, HAS_G: tl.constexpr, PAIR: tl.constexpr,
               WIDE: tl.constexpr, EVEN_K: tl.constexpr):
        """One tile's scaled products for both row blocks (b only when PAIR) and x's squares
        [BLOCK_K/GROUP, GROUP/8]. Per group ([BLOCK_N, BLOCK_K/GROUP]), or WIDE per word, scaled, summed
        once after the loop."""
        x, xg = _x4(x_ptr, g_ptr, cols, k, 0, K, HAS_G, EVEN_K)
        sq = x * x
        da = _nibble(pa, 0) * xg[None, :, :]
        if PAIR != 0:
            db = _nibble(pb, 0) * xg[None, :, :]
        for j in tl.static_range(1, 8):
            x, xg = _x4(x_ptr, g_ptr, cols, k, j, K, HAS_G, EVEN_K)
            sq += x * x
            da += _nibble(pa, j) * xg[None, :, :]
            if PAIR != 0:
                db += _nibble(pb, j) * xg[None, :, :]
        if WIDE:
            da = da * sa.to(tl.float32)[:, :, None]
            if PAIR != 0:
                db = db * sb.to(tl.float32)[:, :, None]
        else:
            da = tl.sum(da, axis=2) * sa.to(tl.float32)
            if PAIR != 0:
                db = tl.sum(db, axis=2) * sb.to(tl.float32)
        if PAIR == 0:
            db = da
        return da, db, sq

    @triton.jit
    def _gemv4_kernel(x_ptr, w_ptr, s_ptr, g_ptr, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale,
                      K: tl.constexpr, GROUP: tl.constexpr, HAS_G: tl.constexpr, HAS_BIAS: tl.constexpr,
                      NORM: tl.constexpr, PAIR: tl.constexpr, PERIOD: tl.constexpr, ROPE_ROWS: tl.constexpr,
                      RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
                      PDL: tl.constexpr, WIDE: tl.constexpr):
        pid = tl.program_id(0)
        HALF: tl.constexpr = PERIOD // 2
        GT: tl.constexpr = BLOCK_K // GROUP    # groups a tile
        GW: tl.constexpr = GROUP // 8          # words a group
        rows = _rows(pid, PAIR, PERIOD, BLOCK_N)
        words = tl.arange(0, GT)[:, None] * GW + tl.arange(0, GW)[None, :]     # [GT, GW], within the tile
        wa_ptrs = w_ptr + rows[:, None, None].to(tl.int64) * (K // 8) + words[None, :, :]
        sa_ptrs = s_ptr + rows[:, None] * (K // GROUP) + tl.arange(0, GT)[None, :]
        wb_ptrs = wa_ptrs + HALF * (K // 8)
        sb_ptrs = sa_ptrs + HALF * (K // GROUP)
        cols = words * 8
        # The first weight tiles do not depend on the previous kernel: read them before waiting.
        pa, sa = _tile4(wa_ptrs, sa_ptrs, 0, K, GROUP, BLOCK_K, EVEN_K)
        pb, sb = pa, sa
        if PAIR != 0:
            pb, sb = _tile4(wb_ptrs, sb_ptrs, 0, K, GROUP, BLOCK_K, EVEN_K)
        if PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
        acc_a, acc_b, sq = _step4(pa, sa, pb, sb, x_ptr, g_ptr, cols, 0, K, HAS_G, PAIR, WIDE, EVEN_K)
        for k in range(BLOCK_K, K, BLOCK_K):
            pa, sa = _tile4(wa_ptrs, sa_ptrs, k, K, GROUP, BLOCK_K, EVEN_K)
            if PAIR != 0:
                pb, sb = _tile4(wb_ptrs, sb_ptrs, k, K, GROUP, BLOCK_K, EVEN_K)
            da, db, sq_k = _step4(pa, sa, pb, sb, x_ptr, g_ptr, cols, k, K, HAS_G, PAIR, WIDE, EVEN_K)
            acc_a += da
            acc_b += db
            if NORM:
                sq += sq_k
        if WIDE:
            ya = tl.sum(tl.sum(acc_a, axis=2), axis=1)
            yb = tl.sum(tl.sum(acc_b, axis=2), axis=1)
        else:
            ya = tl.sum(acc_a, axis=1)
            yb = tl.sum(acc_b, axis=1)
        _epilogue(ya, yb, tl.sum(sq, axis=1), pid, rows, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K,
                  HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Symmetric 4-bit integers q [N, K] in [-8, 7] as bytes [N, K/2]: column 2j + 8 in the low nibble,
    column 2j + 1 + 8 in the high one."""
    u = (q.to(torch.int16) + 8).to(torch.uint8)
    return (u[:, 0::2] | (u[:, 1::2] << 4)).contiguous()


def dequantize(packed: torch.Tensor, scales: torch.Tensor, group: int) -> torch.Tensor:
    """The weight [N, K] (fp32) that packed bytes and their group scales stand for."""
    n = packed.shape[0]
    q = torch.stack([packed & 15, packed >> 4], -1).reshape(n, -1).float() - 8
    return (q.view(n, -1, group) * scales.float()[..., None]).reshape(n, -1)


def gemv4(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, group: int, bias: Optional[torch.Tensor],
          block_n: int, block_k: int, num_warps: int, num_stages: int, pdl: bool = False,
          epilogue: Epilogue = Epilogue(), norm_weight: Optional[torch.Tensor] = None,
          residual: Optional[torch.Tensor] = None, pos: Optional[torch.Tensor] = None,
          inv_freq: Optional[torch.Tensor] = None, wide: bool = False) -> torch.Tensor:
    """y = W (norm_weight * x) (+ bias) for x [K] and the 4-bit W [N, K] of `packed` [N, K/2] and
    `scales` [N, K/group], with `epilogue` around it as `gemv.gemv` does. `wide`: scale each word's
    products and sum once after the loop instead of per group in it (_step4); on an H100 it was 2-6 %
    faster for q/k/v and gate/up, 11 % slower for o, not measured for down; the tuner leaves it out."""
    n, k = packed.shape[0], 2 * packed.shape[1]
    e = epilogue
    if group & (group - 1) or group < 8 or block_k % group or k % group or scales.shape != (n, k // group):
        raise ValueError(f"gemv4: group {group} must be a power of two dividing block_k={block_k} and {k} "
                         f"inputs, at least 8 (one 32-bit word), with scales [{n}, {k // max(group, 1)}] "
                         f"(got {tuple(scales.shape)})")
    programs, period = check_launch("gemv4", n, k, x, block_n, block_k, e, residual, pos, inv_freq)
    y = torch.empty(n // 2 if e.pair == SILU else n, device=x.device, dtype=x.dtype)
    launch = {"launch_pdl": True} if pdl else {}
    _gemv4_kernel[(programs,)](
        x, packed.view(torch.int32), scales, x if norm_weight is None else norm_weight, x if bias is None else bias,
        x if residual is None else residual, y, x if pos is None else pos, x if inv_freq is None else inv_freq,
        0.0 if e.norm_eps is None else e.norm_eps, e.rope_scale, k, group, norm_weight is not None,
        bias is not None, e.norm_eps is not None, e.pair, period, e.rope_rows, e.residual, BLOCK_N=block_n,
        BLOCK_K=block_k, EVEN_K=k % block_k == 0, PDL=pdl, WIDE=wide, num_warps=num_warps, num_stages=num_stages,
        **launch)
    return y


def gemv4_reference(x, packed, scales, group, bias=None, epilogue: Epilogue = Epilogue(), norm_weight=None,
                    residual=None, pos=None, inv_freq=None):
    """What `gemv4` computes, in plain torch (fp32)."""
    w = dequantize(packed, scales, group)
    if norm_weight is not None:
        w = w * norm_weight.float()[None, :]
    return gemv_reference(x, w, bias, epilogue, residual, pos, inv_freq)


@torch.library.custom_op("ferrylm::gemv4", mutates_args=())
def gemv4_op(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, norm_weight: Optional[torch.Tensor],
             bias: Optional[torch.Tensor], residual: Optional[torch.Tensor], pos: Optional[torch.Tensor],
             inv_freq: Optional[torch.Tensor], group: int, block_n: int, block_k: int, num_warps: int, num_stages: int,
             pdl: bool, norm_eps: Optional[float], pair: int, period: int, rope_rows: int, rope_scale: float,
             has_residual: bool, wide: bool) -> torch.Tensor:
    return gemv4(x, packed, scales, group, bias, block_n, block_k, num_warps, num_stages, pdl,
                 Epilogue(norm_eps, pair, period, rope_rows, rope_scale, has_residual), norm_weight, residual, pos,
                 inv_freq, wide)


@gemv4_op.register_fake
def _(x, packed, scales, norm_weight, bias, residual, pos, inv_freq, group, block_n, block_k, num_warps, num_stages,
      pdl, norm_eps, pair, period, rope_rows, rope_scale, has_residual, wide):
    return x.new_empty(packed.shape[0] // 2 if pair == SILU else packed.shape[0])


class Gemv4Linear(torch.nn.Module):
    """A 4-bit linear layer (the integers q [N, K] in [-8, 7] and scales [N, K/group] of
    `int4.round_to_nearest_int4` or of the export's W4A16 artifact): one-token inputs through `gemv4`
    once `configure`d, longer ones through F.linear on the dequantized weight. `norm_weight` (set by
    `decode_step.fold_norms`) multiplies the input first."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: Optional[torch.Tensor], group_size: int):
        super().__init__()
        self.out_features, self.in_features = q.shape
        self.group_size = group_size
        self.register_buffer("packed", pack_int4(q))
        self.register_buffer("scales", scale.contiguous())
        self.register_buffer("norm_weight", None)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach(), requires_grad=False)
        self.cfg, self.pdl, self.epilogue = None, False, Epilogue()

    def configure(self, cfg: dict, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> None:
        self.cfg = {**{key: int(cfg[key]) for key in CONFIG_KEYS}, "wide": bool(cfg.get("wide", False))}
        self.pdl, self.epilogue = pdl, epilogue

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[:-1].numel() == 1 and self.cfg is not None:
            return self.step(x.reshape(-1), plain=True).reshape(*x.shape[:-1], -1)
        if self.norm_weight is not None:
            x = self.norm_weight * x   # transformers' order: the weight times the normalised input
        # In fp32, as the kernels compute: q * scale needs more bits than bf16 has, and rounding the
        # dequantized weight to bf16 changed greedy tokens of SmolLM2 within 24.
        w = dequantize(self.packed, self.scales, self.group_size)
        bias = None if self.bias is None else self.bias.float()
        return torch.nn.functional.linear(x.float(), w, bias).to(x.dtype)

    def step(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None, pos: Optional[torch.Tensor] = None,
             inv_freq: Optional[torch.Tensor] = None, plain: bool = False) -> torch.Tensor:
        e = Epilogue() if plain else self.epilogue
        return gemv4_op(x, self.packed, self.scales, self.norm_weight, self.bias, residual, pos, inv_freq,
                        self.group_size, pdl=self.pdl, **e.op_args(), **self.cfg)


def tune4(layer: Gemv4Linear, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> dict:
    """The fastest configuration for this 4-bit layer's shape, group and epilogue."""
    n, k, group = layer.out_features, layer.in_features, layer.group_size
    x, extra = tuning_inputs(n, k, layer.scales, epilogue)
    g = layer.norm_weight if epilogue.norm_eps is not None else None
    args = (layer.packed, layer.scales, group, None)
    # More rows per program than bf16: every program reads all of x (2 bytes an input) for its rows'
    # half byte an input each, so with few rows x, not the weights, would be most of what is read. Wide
    # tiles (a 3584-input layer in one step of 4096) keep more bytes in flight; 8 warps once a tile holds
    # 16 words a thread of 4 warps.
    pair = 2 if epilogue.pair else 1
    configs = [c for c in candidates(n, k, epilogue, block_ns=(4, 8, 16),
                                     block_ks=[b for b in (512, 1024, 2048, 4096) if b >= group], max_tile=65536)
               if c["num_stages"] == 1 and c["num_warps"] == (8 if pair * c["block_n"] * c["block_k"] > 16384 else 4)]
    return fastest(lambda **cfg: gemv4(x, *args, pdl=pdl, epilogue=epilogue, norm_weight=g, **extra, **cfg),
                   gemv4_reference(x, *args, epilogue, g, **extra), configs,
                   f"gemv4 on {n}x{k} (group {group}), {epilogue}")
