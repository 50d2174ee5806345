"""The batch-1 matrix-vector kernel for 4-bit weights (W4A16): the export's integers and group scales
dequantized in registers, with the same epilogues as the bf16 kernel of `gemv.py`, so `decode_step.py`
runs a 4-bit model's one-token step in the same few kernels.

At one token a 4-bit weight is a quarter of the bf16 bytes; torch's int4 kernel (`int4.py`) is a
general matrix product that does not reach that floor at batch 1 (docs/benchmarks.md, "GPU: batch-1
decode"). The layout is chosen for one row of x (`pack_int4`): 32-bit words of eight inputs each,
stored input-major, [K/8, N], so a tile's words lie contiguous along the outputs, each thread sums its
own outputs' products over K, and every x value a thread needs is one it shares with its whole row of
the tile (no products cross threads until the end). A weight costs one shift, one and-or and one
multiply-add (`_sixteen_plus`); the scale and the integers' offset apply once per word. A program may
own two row blocks (`sub`), so each x value it reads serves twice the words; the next tile's words and
x are read before this tile's products. What each of these gained, and where the kernel stands against
torch's int4 kernel, is in docs/benchmarks.md ("The 4-bit matrix-vector kernel").

The RMS norm before q/k/v and gate/up cannot be folded into integers already rounded: the kernel
multiplies x by the norm's weight as it reads it instead (`norm_weight`), and scales by 1/rms(x) at
the end as the bf16 kernel does. Longer inputs (the prompt) go through F.linear on the dequantized
weight.
"""
from __future__ import annotations

from typing import Optional

import torch

from .gemv import CONFIG_KEYS, Epilogue, SILU, check_launch, gemv_reference

try:
    import triton
    import triton.language as tl

    from .gemv import _epilogue, _rows
except ImportError:  # the CPU-only install: Gemv4Linear is never built there
    triton = None

if triton is not None:
    @triton.jit
    def _tile4(w_ptrs, s_ptrs, k, N: tl.constexpr, K: tl.constexpr, GROUP: tl.constexpr, BLOCK_K: tl.constexpr,
               EVEN_K: tl.constexpr):
        """The packed words [BLOCK_K/GROUP, GROUP/8, BLOCK_N] and group scales [BLOCK_K/GROUP, BLOCK_N] of
        the tile at column k (word row k/8 + i holds columns k + 8i .. k + 8i + 7 of every row)."""
        if EVEN_K:
            p = tl.load(w_ptrs + (k // 8) * N)
            s = tl.load(s_ptrs + (k // GROUP) * N)
        else:
            inside = k // GROUP + tl.arange(0, BLOCK_K // GROUP) < K // GROUP
            p = tl.load(w_ptrs + (k // 8) * N, mask=inside[:, None, None], other=0)
            s = tl.load(s_ptrs + (k // GROUP) * N, mask=inside[:, None], other=0.0)
        return p, s

    @triton.jit
    def _x4(x_ptr, g_ptr, cols, k, j: tl.constexpr, K: tl.constexpr, HAS_G: tl.constexpr):
        """x at the columns of each word's j-th value (cols [BLOCK_K/GROUP, GROUP/8]: each word's
        first column), as read (for the norm's sum of squares) and times the norm's weight."""
        at = k + cols + j
        x = tl.load(x_ptr + at, mask=at < K, other=0.0).to(tl.float32)
        if HAS_G:
            return x, x * tl.load(g_ptr + at, mask=at < K, other=0.0).to(tl.float32)
        return x, x

    @triton.jit
    def _xs(x_ptr, g_ptr, cols, k, K: tl.constexpr, HAS_G: tl.constexpr):
        """x for the tile at column k, as `_x4` reads it, for each of a word's eight values (two tuples
        of eight [GT, GW]): read a tile ahead, as the words are, so no step waits on its x."""
        x0, g0 = _x4(x_ptr, g_ptr, cols, k, 0, K, HAS_G)
        x1, g1 = _x4(x_ptr, g_ptr, cols, k, 1, K, HAS_G)
        x2, g2 = _x4(x_ptr, g_ptr, cols, k, 2, K, HAS_G)
        x3, g3 = _x4(x_ptr, g_ptr, cols, k, 3, K, HAS_G)
        x4, g4 = _x4(x_ptr, g_ptr, cols, k, 4, K, HAS_G)
        x5, g5 = _x4(x_ptr, g_ptr, cols, k, 5, K, HAS_G)
        x6, g6 = _x4(x_ptr, g_ptr, cols, k, 6, K, HAS_G)
        x7, g7 = _x4(x_ptr, g_ptr, cols, k, 7, K, HAS_G)
        return (x0, x1, x2, x3, x4, x5, x6, x7), (g0, g1, g2, g3, g4, g5, g6, g7)

    @triton.jit
    def _sixteen_plus(p, j: tl.constexpr):
        """16 + u as fp32 for u the j-th 4-bit value of each word (bits 4j..4j+3): u moved under the
        top four bits of the mantissa of 16.0, one shift and one and-or. No integer-to-float conversion
        and no subtraction per product: the 16 + 8 offset is taken off once per word (`_step4`)."""
        if 4 * j <= 19:
            b = p << (19 - 4 * j)
        else:
            b = p >> (4 * j - 19)
        return ((b & 0x00780000) | 0x41800000).to(tl.float32, bitcast=True)

    @triton.jit
    def _step4(pa, sa, pb, sb, xs, gs, PAIR: tl.constexpr):
        """One tile: per word [GT, GW, BLOCK_N] of both row blocks (b only when PAIR), its scale times
        sum_j (16 + u_j - 24) x_j, which is sum_j q_j x_j (the stored u is q + 8); and x's squares [GT, GW]."""
        sq = xs[0] * xs[0]
        xsum = gs[0]
        da = _sixteen_plus(pa, 0) * gs[0][:, :, None]
        if PAIR != 0:
            db = _sixteen_plus(pb, 0) * gs[0][:, :, None]
        for j in tl.static_range(1, 8):
            sq += xs[j] * xs[j]
            xsum += gs[j]
            da += _sixteen_plus(pa, j) * gs[j][:, :, None]
            if PAIR != 0:
                db += _sixteen_plus(pb, j) * gs[j][:, :, None]
        # Per word, not per group: a sum over the group's words would cross threads every tile.
        off = 24.0 * xsum[:, :, None]
        if PAIR != 0:
            db = (db - off) * sb.to(tl.float32)[:, None, :]
        da = (da - off) * sa.to(tl.float32)[:, None, :]
        if PAIR == 0:
            db = da
        return da, db, sq

    @triton.jit
    def _tiles(w_ptrs, s_ptrs, k, HALF: tl.constexpr, N: tl.constexpr, K: tl.constexpr, GROUP: tl.constexpr,
               BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, PAIR: tl.constexpr):
        """A row block's words and scales at column k, and its paired block's (the same when not PAIR)."""
        pa, sa = _tile4(w_ptrs, s_ptrs, k, N, K, GROUP, BLOCK_K, EVEN_K)
        pb, sb = pa, sa
        if PAIR != 0:
            pb, sb = _tile4(w_ptrs + HALF, s_ptrs + HALF, k, N, K, GROUP, BLOCK_K, EVEN_K)
        return pa, sa, pb, sb

    @triton.jit
    def _gemv4_kernel(x_ptr, w_ptr, s_ptr, g_ptr, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale,
                      N: tl.constexpr, K: tl.constexpr, GROUP: tl.constexpr, HAS_G: tl.constexpr,
                      HAS_BIAS: tl.constexpr, NORM: tl.constexpr, PAIR: tl.constexpr, PERIOD: tl.constexpr,
                      ROPE_ROWS: tl.constexpr, RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      EVEN_K: tl.constexpr, PDL: tl.constexpr, SUB: tl.constexpr):
        # SUB row blocks a program (virtual programs SUB * pid + i): each x value a thread reads serves
        # SUB times as many words.
        pid = tl.program_id(0) * SUB
        HALF: tl.constexpr = PERIOD // 2
        GT: tl.constexpr = BLOCK_K // GROUP    # groups a tile
        GW: tl.constexpr = GROUP // 8          # word rows a group
        word_rows = tl.arange(0, GT)[:, None] * GW + tl.arange(0, GW)[None, :]     # [GT, GW], within the tile
        cols = word_rows * 8
        rows = _rows(pid, PAIR, PERIOD, BLOCK_N)
        w_ptrs = w_ptr + word_rows[:, :, None] * N + rows[None, None, :]
        s_ptrs = s_ptr + tl.arange(0, GT)[:, None] * N + rows[None, :]
        rows2 = _rows(pid + 1, PAIR, PERIOD, BLOCK_N)
        w2_ptrs = w_ptr + word_rows[:, :, None] * N + rows2[None, None, :]
        s2_ptrs = s_ptr + tl.arange(0, GT)[:, None] * N + rows2[None, :]
        # The first weight tiles do not depend on the previous kernel: read them before waiting.
        t = _tiles(w_ptrs, s_ptrs, 0, HALF, N, K, GROUP, BLOCK_K, EVEN_K, PAIR)
        t2 = t
        if SUB == 2:
            t2 = _tiles(w2_ptrs, s2_ptrs, 0, HALF, N, K, GROUP, BLOCK_K, EVEN_K, PAIR)
        if PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
        acc_a = tl.zeros([GT, GW, BLOCK_N], tl.float32)
        acc_b = tl.zeros([GT, GW, BLOCK_N], tl.float32)
        acc2_a = tl.zeros([GT, GW, BLOCK_N], tl.float32)
        acc2_b = tl.zeros([GT, GW, BLOCK_N], tl.float32)
        sq = tl.zeros([GT, GW], tl.float32)
        # The next tile's words and x are requested before this one's products: one tile always in flight.
        xs, gs = _xs(x_ptr, g_ptr, cols, 0, K, HAS_G)
        for k in range(0, K, BLOCK_K):
            nt = _tiles(w_ptrs, s_ptrs, k + BLOCK_K, HALF, N, K, GROUP, BLOCK_K, False, PAIR)
            nt2 = nt
            if SUB == 2:
                nt2 = _tiles(w2_ptrs, s2_ptrs, k + BLOCK_K, HALF, N, K, GROUP, BLOCK_K, False, PAIR)
            nxs, ngs = _xs(x_ptr, g_ptr, cols, k + BLOCK_K, K, HAS_G)
            da, db, sq_k = _step4(t[0], t[1], t[2], t[3], xs, gs, PAIR)
            acc_a += da
            if PAIR != 0:
                acc_b += db
            if SUB == 2:
                da, db, _ = _step4(t2[0], t2[1], t2[2], t2[3], xs, gs, PAIR)
                acc2_a += da
                if PAIR != 0:
                    acc2_b += db
            if NORM:
                sq += sq_k
            t, t2, xs, gs = nt, nt2, nxs, ngs
        sq_sum = tl.sum(sq, axis=1)
        ya = tl.sum(tl.sum(acc_a, axis=1), axis=0)
        yb = ya
        if PAIR != 0:
            yb = tl.sum(tl.sum(acc_b, axis=1), axis=0)
        _epilogue(ya, yb, sq_sum, pid, rows, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K,
                  HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)
        if SUB == 2:
            ya = tl.sum(tl.sum(acc2_a, axis=1), axis=0)
            yb = ya
            if PAIR != 0:
                yb = tl.sum(tl.sum(acc2_b, axis=1), axis=0)
            _epilogue(ya, yb, sq_sum, pid + 1, rows2, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K,
                      HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)


def pack_int4(q: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric 4-bit integers q [N, K] in [-8, 7] and their group scales [N, K/group] in the kernel's
    layout: words [K/8, N] (int32; input 8w + j of output n in bits 4j..4j+3 of word [w, n], stored
    as q + 8) and scales [K/group, N]."""
    n, k = q.shape
    u = (q.to(torch.int64) + 8).view(n, k // 8, 8)
    words = (u << torch.arange(0, 32, 4, device=q.device)).sum(-1)
    words = torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)
    return words.t().contiguous(), scale.t().contiguous()


def dequantize(packed: torch.Tensor, scales: torch.Tensor, group: int) -> torch.Tensor:
    """The weight [N, K] (fp32) that `pack_int4`'s words and scales stand for."""
    words, n = packed.shape
    # int32 shifts: an int64 arange would widen every weight of the prompt path's temporary to 8 bytes
    u = (packed[:, :, None] >> torch.arange(0, 32, 4, device=packed.device, dtype=torch.int32)) & 15
    q = u.permute(1, 0, 2).reshape(n, 8 * words).float() - 8
    return (q.view(n, -1, group) * scales.t().float()[..., None]).reshape(n, -1)


def gemv4(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, group: int, bias: Optional[torch.Tensor],
          block_n: int, block_k: int, num_warps: int, num_stages: int, pdl: bool = False,
          epilogue: Epilogue = Epilogue(), norm_weight: Optional[torch.Tensor] = None,
          residual: Optional[torch.Tensor] = None, pos: Optional[torch.Tensor] = None,
          inv_freq: Optional[torch.Tensor] = None, sub: int = 1) -> torch.Tensor:
    """y = W (norm_weight * x) (+ bias) for x [K] and the 4-bit W [N, K] of `pack_int4`'s `packed`
    [K/8, N] and `scales` [K/group, N], with `epilogue` around it as `gemv.gemv` does. `sub` (1 or 2):
    row blocks of `block_n` a program."""
    k, n = 8 * packed.shape[0], packed.shape[1]
    e = epilogue
    if group & (group - 1) or group < 8 or block_k % group or k % group or scales.shape != (k // group, n):
        raise ValueError(f"gemv4: group {group} must be a power of two dividing block_k={block_k} and {k} "
                         f"inputs, at least 8 (one 32-bit word), with scales [{k // max(group, 1)}, {n}] "
                         f"(got {tuple(scales.shape)})")
    programs, period = check_launch("gemv4", n, k, x, block_n, block_k, e, residual, pos, inv_freq)
    if sub not in (1, 2) or programs % sub:
        raise ValueError(f"gemv4: {programs} row blocks do not split into programs of sub={sub} (1 or 2)")
    y = torch.empty(n // 2 if e.pair == SILU else n, device=x.device, dtype=x.dtype)
    launch = {"launch_pdl": True} if pdl else {}
    _gemv4_kernel[(programs // sub,)](
        x, packed, scales, x if norm_weight is None else norm_weight, x if bias is None else bias,
        x if residual is None else residual, y, x if pos is None else pos, x if inv_freq is None else inv_freq,
        0.0 if e.norm_eps is None else e.norm_eps, e.rope_scale, n, k, group, norm_weight is not None,
        bias is not None, e.norm_eps is not None, e.pair, period, e.rope_rows, e.residual, BLOCK_N=block_n,
        BLOCK_K=block_k, EVEN_K=k % block_k == 0, PDL=pdl, SUB=sub, num_warps=num_warps, num_stages=num_stages,
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
             has_residual: bool, sub: int) -> torch.Tensor:
    return gemv4(x, packed, scales, group, bias, block_n, block_k, num_warps, num_stages, pdl,
                 Epilogue(norm_eps, pair, period, rope_rows, rope_scale, has_residual), norm_weight, residual, pos,
                 inv_freq, sub)


@gemv4_op.register_fake
def _(x, packed, scales, norm_weight, bias, residual, pos, inv_freq, group, block_n, block_k, num_warps, num_stages,
      pdl, norm_eps, pair, period, rope_rows, rope_scale, has_residual, sub):
    return x.new_empty(packed.shape[1] // 2 if pair == SILU else packed.shape[1])


class Gemv4Linear(torch.nn.Module):
    """A 4-bit linear layer (the integers q [N, K] in [-8, 7] and scales [N, K/group] of
    `int4.round_to_nearest_int4` or of the export's W4A16 artifact): one-token inputs through `gemv4`
    once `configure`d, longer ones through F.linear on the dequantized weight. `norm_weight` (set by
    `decode_step.fold_norms`) multiplies the input first."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: Optional[torch.Tensor], group_size: int):
        super().__init__()
        self.out_features, self.in_features = q.shape
        self.group_size = group_size
        packed, scales = pack_int4(q, scale)
        self.register_buffer("packed", packed)
        self.register_buffer("scales", scales)
        self.register_buffer("norm_weight", None)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach(), requires_grad=False)
        self.cfg, self.pdl, self.epilogue = None, False, Epilogue()

    def configure(self, cfg: dict, pdl: bool = False, epilogue: Epilogue = Epilogue()) -> None:
        self.cfg = {**{key: int(cfg[key]) for key in CONFIG_KEYS}, "sub": int(cfg.get("sub", 1))}
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
