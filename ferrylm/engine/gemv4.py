"""The batch-1 matrix-vector kernel for 4-bit weights (W4A16): the export's integers and group scales
dequantized in registers, with the same epilogues as the bf16 kernel of `gemv.py`, so `decode_step.py`
runs a 4-bit model's one-token step in the same few kernels.

At one token a 4-bit weight is a quarter of the bf16 bytes; torch's int4 kernel (`int4.py`) is a
general matrix product that does not reach that floor at batch 1 (docs/benchmarks.md, "GPU: batch-1
decode"). The layout is chosen for one row of x (`pack_int4`): 32-bit words of eight inputs each,
stored input-major, [K/8, N], so a tile's words lie contiguous along the outputs, each thread sums its
own outputs' products over K, and every x value a thread needs is one it shares with its whole row of
the tile (no products cross threads until the end). A weight costs one and and one multiply-add: the
4-bit value masked in place is a subnormal float's bits, taken exactly by the multiply-add against x
scaled to match (`_dot8`); the scale and the integers' offset apply once per word. x is read eight
bytes at a time. A program may own two row blocks (`sub`), so each x value it reads serves twice the
words; the next tile's words and x are read before this tile's products. What each of these gained,
and where the kernel stands against torch's int4 kernel, is in docs/benchmarks.md ("The 4-bit
matrix-vector kernel").

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
    # A nibble masked in place is the bit pattern of a subnormal float, u * 2^(pos - 149) for its lowest bit
    # at pos, and the multiply-add takes it exactly (nothing here flushes subnormals to zero): a weight
    # costs one and and one multiply-add when x comes scaled by 2^(149 - pos - SHIFT). Values 0-4 lie in
    # the mantissa's bits (0..19); 5-7 reach the exponent's and are read from the word shifted right by 12
    # (bits 8..19). Every product is q x 2^-SHIFT, which the end multiplies back; g x of up to 2^29 fits.
    SHIFT = tl.constexpr(50)

    @triton.jit
    def _x8(ptr, word_rows, k, K: tl.constexpr):
        """The eight values at each word's columns (word_rows [BLOCK_K/GROUP, GROUP/8], within the tile at
        column k) as fp32. bf16 (the engine's) in two 8-byte reads: one read serves four values, where
        one read a value made a thread's load instructions outnumber its words' three to one."""
        out = ()
        if ptr.dtype.element_ty == tl.bfloat16:
            inside = k + word_rows * 8 < K
            at = ptr.to(tl.pointer_type(tl.int64)) + k // 4 + word_rows * 2
            for half in tl.static_range(2):
                v = tl.load(at + half, mask=inside, other=0)
                for part in tl.static_range(2):
                    bits = (v >> (32 * part)).to(tl.int32)
                    out = out + ((bits << 16).to(tl.float32, bitcast=True),
                                 (bits & -65536).to(tl.float32, bitcast=True))
        else:
            for j in tl.static_range(8):
                at = k + word_rows * 8 + j
                out = out + (tl.load(ptr + at, mask=at < K, other=0.0).to(tl.float32),)
        return out

    @triton.jit
    def _xs(x_ptr, g_ptr, word_rows, k, K: tl.constexpr, HAS_G: tl.constexpr):
        """For the tile at column k, per word [GT, GW]: x's sum of squares, the integers' offset (-8 g x
        summed: the stored u is q + 8; scaled by 2^-SHIFT as the products are) and the eight g x, each
        scaled by 2^(149 - pos - SHIFT) for its value's subnormal (`_dot8`)."""
        x = _x8(x_ptr, word_rows, k, K)
        g = x
        if HAS_G:
            g = _x8(g_ptr, word_rows, k, K)
        sq = x[0] * x[0]
        gsum = x[0] * g[0] if HAS_G else x[0]
        scaled = ()
        for j in tl.static_range(8):
            gx = x[j] * g[j] if HAS_G else x[j]
            if j > 0:
                sq += x[j] * x[j]
                gsum += gx
            # 4 j - 12 (j // 5): the value's lowest bit once read (`_dot8`)
            scaled = scaled + (gx * (2.0 ** (149 - (4 * j - 12 * (j // 5)) - SHIFT)),)
        return sq, gsum * (-8.0 * 2.0 ** -SHIFT), scaled

    @triton.jit
    def _dot8(p, s, x):
        """Per word [GT, GW, BLOCK_N] of words p: its group's scale s times 2^-SHIFT sum_j q_j x_j (x: `_xs`'s),
        from the offset on, one and and one multiply-add a weight."""
        high = p >> 12
        d = x[1][:, :, None]
        for j in tl.static_range(8):
            word = p
            if j >= 5:   # values 5-7 from the word >> 12: bits 8..19
                word = high
            d += (word & (15 << (4 * j - 12 * (j // 5)))).to(tl.float32, bitcast=True) * x[2][j][:, :, None]
        return d * s.to(tl.float32)[:, None, :]

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
    def _words(w_ptrs, s_ptrs, w2_ptrs, s2_ptrs, k, HALF: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               GROUP: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, PAIR: tl.constexpr,
               SUB: tl.constexpr):
        """The words and scales at column k of each row block this program owns: a, its pair b, and the
        second block's a and b (c, d) when SUB is 2; absent ones repeat a."""
        pa, sa = _tile4(w_ptrs, s_ptrs, k, N, K, GROUP, BLOCK_K, EVEN_K)
        pb, sb, pc, sc, pd, sd = pa, sa, pa, sa, pa, sa
        if PAIR != 0:
            pb, sb = _tile4(w_ptrs + HALF, s_ptrs + HALF, k, N, K, GROUP, BLOCK_K, EVEN_K)
        if SUB == 2:
            pc, sc = _tile4(w2_ptrs, s2_ptrs, k, N, K, GROUP, BLOCK_K, EVEN_K)
            if PAIR != 0:
                pd, sd = _tile4(w2_ptrs + HALF, s2_ptrs + HALF, k, N, K, GROUP, BLOCK_K, EVEN_K)
        return pa, sa, pb, sb, pc, sc, pd, sd

    @triton.jit
    def _add(acc, t, PAIR: tl.constexpr, SUB: tl.constexpr, NORM: tl.constexpr):
        """The accumulators (row blocks a, b, c, d of `_words`; x's squares) plus one tile t: (words, x)."""
        words, x = t
        pa, sa, pb, sb, pc, sc, pd, sd = words
        a, b, c, d, sq = acc
        a += _dot8(pa, sa, x)
        if PAIR != 0:
            b += _dot8(pb, sb, x)
        if SUB == 2:
            c += _dot8(pc, sc, x)
            if PAIR != 0:
                d += _dot8(pd, sd, x)
        if NORM:
            sq += x[0]
        return a, b, c, d, sq

    @triton.jit
    def _read(ptrs, k, HALF: tl.constexpr, N: tl.constexpr, K: tl.constexpr, GROUP: tl.constexpr,
              BLOCK_K: tl.constexpr, PAIR: tl.constexpr, SUB: tl.constexpr, HAS_G: tl.constexpr):
        """The tile at column k (masked: it may lie past K): its words (`_words`) and x (`_xs`)."""
        w_ptrs, s_ptrs, w2_ptrs, s2_ptrs, x_ptr, g_ptr, word_rows = ptrs
        return (_words(w_ptrs, s_ptrs, w2_ptrs, s2_ptrs, k, HALF, N, K, GROUP, BLOCK_K, False, PAIR, SUB),
                _xs(x_ptr, g_ptr, word_rows, k, K, HAS_G))

    @triton.jit
    def _finish(a, b, sq, pid, rows, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K: tl.constexpr,
                HAS_BIAS: tl.constexpr, NORM: tl.constexpr, PAIR: tl.constexpr, PERIOD: tl.constexpr,
                ROPE_ROWS: tl.constexpr, RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr):
        """One row block's sums over its words, scaled back by 2^SHIFT, through the bf16 kernel's epilogue."""
        ya = tl.sum(tl.sum(a, axis=1), axis=0) * 2.0 ** SHIFT
        yb = ya
        if PAIR != 0:
            yb = tl.sum(tl.sum(b, axis=1), axis=0) * 2.0 ** SHIFT
        _epilogue(ya, yb, sq, pid, rows, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K, HAS_BIAS,
                  NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)

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
        TILES: tl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
        word_rows = tl.arange(0, GT)[:, None] * GW + tl.arange(0, GW)[None, :]     # [GT, GW], within the tile
        rows = _rows(pid, PAIR, PERIOD, BLOCK_N)
        rows2 = _rows(pid + 1, PAIR, PERIOD, BLOCK_N)
        w_ptrs = w_ptr + word_rows[:, :, None] * N + rows[None, None, :]
        s_ptrs = s_ptr + tl.arange(0, GT)[:, None] * N + rows[None, :]
        w2_ptrs = w_ptr + word_rows[:, :, None] * N + rows2[None, None, :]
        s2_ptrs = s_ptr + tl.arange(0, GT)[:, None] * N + rows2[None, :]
        ptrs = w_ptrs, s_ptrs, w2_ptrs, s2_ptrs, x_ptr, g_ptr, word_rows
        # The first tile's weights do not depend on the previous kernel: read them before waiting.
        words = _words(w_ptrs, s_ptrs, w2_ptrs, s2_ptrs, 0, HALF, N, K, GROUP, BLOCK_K, EVEN_K, PAIR, SUB)
        if PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
        zero = tl.zeros([GT, GW, BLOCK_N], tl.float32)
        acc = zero, zero, zero, zero, tl.zeros([GT, GW], tl.float32)
        t = words, _xs(x_ptr, g_ptr, word_rows, 0, K, HAS_G)
        # One tile always in flight: the next one is requested before this one's products. Two tiles a
        # pass, so the tile read ahead is never copied between the loop's variables (an odd one goes first).
        if TILES % 2 == 1:
            u = _read(ptrs, BLOCK_K, HALF, N, K, GROUP, BLOCK_K, PAIR, SUB, HAS_G)
            acc = _add(acc, t, PAIR, SUB, NORM)
            t = u
        for k in range((TILES % 2) * BLOCK_K, K, 2 * BLOCK_K):
            u = _read(ptrs, k + BLOCK_K, HALF, N, K, GROUP, BLOCK_K, PAIR, SUB, HAS_G)
            acc = _add(acc, t, PAIR, SUB, NORM)
            t = _read(ptrs, k + 2 * BLOCK_K, HALF, N, K, GROUP, BLOCK_K, PAIR, SUB, HAS_G)
            acc = _add(acc, u, PAIR, SUB, NORM)
        a, b, c, d, sq = acc
        sq = tl.sum(sq, axis=1)
        _finish(a, b, sq, pid, rows, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K, HAS_BIAS, NORM,
                PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)
        if SUB == 2:
            _finish(c, d, sq, pid + 1, rows2, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K, HAS_BIAS,
                    NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)


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
    # The kernel reads bf16 x and norm weights eight bytes at a time: a view off that alignment is copied.
    x, norm_weight = (v if v is None or v.data_ptr() % 8 == 0 else v.clone() for v in (x, norm_weight))
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
