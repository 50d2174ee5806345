"""The batch-1 matrix-vector kernel for 4-bit weights (W4A16): the export's integers and group scales
dequantized in registers, with the same epilogues as the bf16 kernel of `gemv.py`, so `decode_step.py`
runs a 4-bit model's one-token step in the same few kernels.

At one token a 4-bit weight is a quarter of the bf16 bytes; torch's int4 kernel (`int4.py`) is a
general matrix product that does not reach that floor at batch 1 (docs/performance.md, "Batch-1
decode"). The layout is chosen for one row of x (`pack_int4`): 32-bit words of eight inputs each,
input-major within strips of eight outputs, [N/8, K/8, 8], so the eight words of a word row lie
together (32 bytes), each thread sums its own outputs' products over K, and every x value a thread
needs is one it shares with its whole row of the tile (no products cross threads until the end); a
row block's tiles are contiguous, so a warp's read is a few whole cache lines where the plain
input-major layout ([K/8, N]) scattered it over 16. The kernel itself is in `gemv4_kernel.py`: a
weight costs one and and one multiply-add there (the 4-bit value masked in place is a subnormal
float's bits, taken exactly by the multiply-add against x scaled to match); the scale and the
integers' offset apply once per word, and x is read eight bytes at a time. A program may own two row
blocks (`sub`), so each x value it reads serves twice the words; the next tile's words and x are read
before this tile's products, or the words two tiles ahead (`ahead`: more of the reads in flight). What
each of these gained, and where the kernel stands against torch's int4 kernel, is in
studies/decode_kernels/NOTES.md.

The RMS norm before q/k/v and gate/up cannot be folded into integers already rounded: the kernel
multiplies x by the norm's weight as it reads it instead (`norm_weight`), and scales by 1/rms(x) at
the end as the bf16 kernel does. Longer inputs (the prompt) go through `prompt4` on GPUs: each
group's integers through the tensor cores, exact as bf16, and the scales applied to the group's fp32
sums, the fp32 product up to summation order without writing the dequantized weight out (elsewhere,
F.linear in fp32 on it).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from .gemv import SILU, Epilogue, Launch, check_launch, gemv_reference

try:
    from .gemv4_kernel import _gemv4_kernel, _prompt4_kernel
except ImportError:  # the CPU-only install: linear.Gemv4Linear is never built there
    _gemv4_kernel = _prompt4_kernel = None


@contextmanager
def kernel_swapped(program):
    """`gemv4` launches `program` (a Triton program of the same signature) in place of its own within the
    block: a study's variants of the kernel (read-only, empty) timed in the engine's captured step."""
    global _gemv4_kernel
    own, _gemv4_kernel = _gemv4_kernel, program
    try:
        yield
    finally:
        _gemv4_kernel = own


def pack_int4(q: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric 4-bit integers q [N, K] in [-8, 7] and their group scales [N, K/group] in the kernel's
    layout: strips of B rows (8, or the largest power of two dividing N), words [N/B, K/8, B] (int32;
    input 8w + j of output n in bits 4j..4j+3 of word [n // B, w, n % B], stored as q + 8) and scales
    [N/B, K/group, B]."""
    n, k = q.shape
    b = min(8, n & -n)
    u = (q.to(torch.int64) + 8).view(n, k // 8, 8)
    words = (u << torch.arange(0, 32, 4, device=q.device)).sum(-1)
    words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    return (
        words.view(n // b, b, k // 8).transpose(1, 2).contiguous(),
        scale.reshape(n // b, b, -1).transpose(1, 2).contiguous(),
    )


def dequantize(packed: torch.Tensor, scales: torch.Tensor, group: int) -> torch.Tensor:
    """The weight [N, K] (fp32) that `pack_int4`'s words and scales stand for."""
    strips, words, b = packed.shape
    # int32 shifts: an int64 arange would widen every weight of the prompt path's temporary to 8 bytes
    u = (packed[..., None] >> torch.arange(0, 32, 4, device=packed.device, dtype=torch.int32)) & 15
    q = u.transpose(1, 2).reshape(strips * b, 8 * words).float() - 8
    s = scales.transpose(1, 2).reshape(strips * b, -1).float()
    return (q.view(strips * b, -1, group) * s[..., None]).reshape(strips * b, -1)


def _checked(
    x, packed, scales, group: int, launch: Launch, e: Epilogue, residual, pos, inv_freq, sub: int, ahead: int
) -> tuple[int, int]:
    """gemv4's (row blocks, rope period), or a ValueError naming the argument that does not fit."""
    strips, words, b = packed.shape
    k, block_k = 8 * words, launch.block_k
    if group & (group - 1) or group < 8 or block_k % group or k % group or scales.shape != (strips, k // group, b):
        raise ValueError(
            f"gemv4: group {group} must be a power of two dividing block_k={block_k} and {k} "
            f"inputs, at least 8 (one 32-bit word), with scales [{strips}, {k // max(group, 1)}, {b}] "
            f"(got {tuple(scales.shape)})"
        )
    programs, period = check_launch("gemv4", strips * b, k, x, launch, e, residual, pos, inv_freq)
    if ahead not in (1, 2):
        raise ValueError(f"gemv4: ahead={ahead} tiles of words read ahead; 1 or 2")
    if sub not in (1, 2) or programs % sub:
        raise ValueError(f"gemv4: {programs} row blocks do not split into programs of sub={sub} (1 or 2)")
    return programs, period


def gemv4(
    x: torch.Tensor,
    packed: torch.Tensor,
    scales: torch.Tensor,
    group: int,
    bias: torch.Tensor | None,
    launch: Launch,
    epilogue: Epilogue = Epilogue(),
    norm_weight: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    pos: torch.Tensor | None = None,
    inv_freq: torch.Tensor | None = None,
    sub: int = 1,
    ahead: int = 1,
) -> torch.Tensor:
    """y = W (norm_weight * x) (+ bias), W [N, K] 4-bit as `pack_int4` packs it, `epilogue` as in `gemv.gemv`;
    `sub` (1 or 2): row blocks of `block_n` a program; `ahead` (1 or 2): tiles of words read ahead."""
    strips, words, b = packed.shape
    k, n = 8 * words, strips * b
    blocks, period = _checked(x, packed, scales, group, launch, epilogue, residual, pos, inv_freq, sub, ahead)
    # The kernel reads bf16 x and norm weights eight bytes at a time: a view off that alignment is copied.
    x, norm_weight = (v if v is None or v.data_ptr() % 8 == 0 else v.clone() for v in (x, norm_weight))
    y = torch.empty(n // 2 if epilogue.pair == SILU else n, device=x.device, dtype=x.dtype)
    _gemv4_kernel[(blocks // sub,)](
        x,
        packed,
        scales,
        x if norm_weight is None else norm_weight,
        x if bias is None else bias,
        x if residual is None else residual,
        y,
        x if pos is None else pos,
        x if inv_freq is None else inv_freq,
        **epilogue.kernel_args(k, period, bias is not None),
        **launch.kernel_args(),
        GROUP=group,
        HAS_G=norm_weight is not None,
        SUB=sub,
        B=b,
        AHEAD=ahead,
    )
    return y


def prompt4(
    x: torch.Tensor,
    packed: torch.Tensor,
    scales: torch.Tensor,
    group: int,
    block_m: int = 64,
    block_n: int = 64,
    num_warps: int = 4,
) -> torch.Tensor:
    """x [M, K] (bf16; fp32 multiplies in fp32) times the transposed 4-bit weight of `pack_int4` (fp32
    [M, N]): the prompt's product, where a row of x is not alone. The same numbers as F.linear in fp32
    on `dequantize`'s weight (up to summation order) without writing that weight out in fp32 first.
    The default tile was the fastest overall of 12 at a 128-token prompt on an H100 (studies/decode_kernels/prompt4.py --sweep)."""
    strips, words, b = packed.shape
    m, k, n = x.shape[0], 8 * words, strips * b
    if (
        x.dtype not in (torch.bfloat16, torch.float32)
        or x.shape[1] != k
        or group < 16
        or group & (group - 1)
        or scales.shape != (strips, k // group, b)
    ):
        raise ValueError(
            f"prompt4: bf16 or fp32 x [M, {k}] and a power-of-two group of at least 16 (tensor "
            f"cores) with scales [{strips}, {k // max(group, 1)}, {b}]; got {x.dtype} "
            f"{tuple(x.shape)}, group {group}, scales {tuple(scales.shape)}"
        )
    y = torch.empty(m, n, device=x.device, dtype=torch.float32)
    grid = (-(-m // block_m), -(-n // block_n))
    _prompt4_kernel[grid](
        x.contiguous(), packed, scales, y, m, n, k, group, b, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps
    )
    return y


def gemv4_reference(
    x,
    packed,
    scales,
    group,
    bias=None,
    epilogue: Epilogue = Epilogue(),
    norm_weight=None,
    residual=None,
    pos=None,
    inv_freq=None,
):
    """What `gemv4` computes, in plain torch (fp32)."""
    w = dequantize(packed, scales, group)
    if norm_weight is not None:
        w = w * norm_weight.float()[None, :]
    return gemv_reference(x, w, bias, epilogue, residual, pos, inv_freq)
