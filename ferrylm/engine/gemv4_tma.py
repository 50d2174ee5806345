"""The 4-bit kernel with its words copied by the tensor memory accelerator (Hopper's TMA) into a ring
of shared-memory stages, instead of read into registers a tile ahead (`gemv4_kernel.py`).

In the captured step the 4-bit products read 1.76 TB/s, and taking their arithmetic out made them
slower, not faster (docs/benchmarks.md, "The configurations chosen inside the captured step"): what
bounds them is how the loads are issued. A thread holding the next tile in registers keeps about
20 KB a multiprocessor in flight; TMA copies are issued by one thread, hold no registers, and the
compiler's pipeline (`tl.range(..., num_stages=STAGES)`) keeps STAGES - 1 tiles of every program in
flight while the threads multiply the one that has landed. The arithmetic, the epilogues and the
layout (strips of eight rows, `gemv4.pack_int4`) are the register kernel's; a program owns row blocks
of exactly one strip (block_n 8). The tuner offers it beside the register kernel (`tuning.TUNE4`'s
entries with stages) and the engine keeps whichever the captured step runs faster.
"""
import triton
import triton.language as tl

from .gemv import _epilogue, _rows
from .gemv4_kernel import _dot8, _sums, _xs


@triton.jit
def _strip(pid, PAIR: tl.constexpr, PERIOD: tl.constexpr, B: tl.constexpr):
    """The strip of (virtual) program pid's first-half rows: `gemv._rows` for one strip a row block."""
    if PAIR == 0:
        return pid
    per_group: tl.constexpr = (PERIOD // 2) // B
    return (pid // per_group) * (PERIOD // B) + pid % per_group


@triton.jit
def _tiles(w_desc, s_ptr, strip, k, K: tl.constexpr, GT: tl.constexpr, GW: tl.constexpr, B: tl.constexpr,
           GROUP: tl.constexpr):
    """The words [GT, GW, B] (TMA; past K: zeros) and scales [GT, B] (plain loads: 16 bytes a group) of
    one strip's tile at column k."""
    p = w_desc.load([strip, k // GROUP, 0, 0]).reshape(GT, GW, B)
    groups = k // GROUP + tl.arange(0, GT)
    at = s_ptr + strip * (K // GROUP * B) + groups[:, None] * B + tl.arange(0, B)[None, :]
    return p, tl.load(at, mask=(groups < K // GROUP)[:, None], other=0.0)


@triton.jit
def _gemv4_tma_kernel(x_ptr, w_desc, s_ptr, g_ptr, b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale,
                      K: tl.constexpr, GROUP: tl.constexpr, HAS_G: tl.constexpr, HAS_BIAS: tl.constexpr,
                      NORM: tl.constexpr, PAIR: tl.constexpr, PERIOD: tl.constexpr, ROPE_ROWS: tl.constexpr,
                      RESIDUAL: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr, SUB: tl.constexpr,
                      B: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0) * SUB
    HALF_STRIPS: tl.constexpr = (PERIOD // 2) // B
    GT: tl.constexpr = BLOCK_K // GROUP
    GW: tl.constexpr = GROUP // 8
    word_rows = tl.arange(0, GT)[:, None] * GW + tl.arange(0, GW)[None, :]
    sa, sc = _strip(pid, PAIR, PERIOD, B), _strip(pid + 1, PAIR, PERIOD, B)
    if PDL:   # x is the previous kernel's output; the weights' copies start inside the loop
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    zero = tl.zeros([GT, GW, B], tl.float32)
    a, b, c, d, sq = zero, zero, zero, zero, tl.zeros([GT, GW], tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        x = _xs(x_ptr, g_ptr, word_rows, k, K, HAS_G)
        p, s = _tiles(w_desc, s_ptr, sa, k, K, GT, GW, B, GROUP)
        a += _dot8(p, s, x)
        if PAIR != 0:
            p, s = _tiles(w_desc, s_ptr, sa + HALF_STRIPS, k, K, GT, GW, B, GROUP)
            b += _dot8(p, s, x)
        if SUB == 2:
            p, s = _tiles(w_desc, s_ptr, sc, k, K, GT, GW, B, GROUP)
            c += _dot8(p, s, x)
            if PAIR != 0:
                p, s = _tiles(w_desc, s_ptr, sc + HALF_STRIPS, k, K, GT, GW, B, GROUP)
                d += _dot8(p, s, x)
        if NORM:
            sq += x[0]
    sq = tl.sum(sq, axis=1)
    ya, yb = _sums(a, b, PAIR)
    _epilogue(ya, yb, sq, pid, _rows(pid, PAIR, PERIOD, B), b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale, K, HAS_BIAS, NORM, PAIR,
              PERIOD, ROPE_ROWS, RESIDUAL, B)
    if SUB == 2:
        ya, yb = _sums(c, d, PAIR)
        _epilogue(ya, yb, sq, pid + 1, _rows(pid + 1, PAIR, PERIOD, B), b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps,
                  rope_scale, K, HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, B)


def descriptor(packed, group: int, block_k: int):
    """The TMA descriptor of `pack_int4`'s words, viewed [N/B, K/group, group/8, B] (a tile: one strip's
    block_k/group groups)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    strips, words, b = packed.shape
    gw, gt = group // 8, block_k // group
    return TensorDescriptor(packed, [strips, words // gw, gw, b], [words * b, gw * b, b, 1], [1, gt, gw, b])
