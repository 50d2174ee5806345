"""The 4-bit kernel itself (Triton kernel language), launched by `gemv4.gemv4`; the layout it reads and
why it is written this way are in gemv4.py's docstring.
"""

import triton
import triton.language as tl

from .gemv import _epilogue, _rows

# A nibble masked in place is the bit pattern of a subnormal float, u * 2^(pos - 149) for its lowest bit
# at pos, and the multiply-add takes it exactly (nothing here flushes subnormals to zero): a weight
# costs one and and one multiply-add when x comes scaled by 2^(149 - pos - SHIFT). Values 0-4 lie in
# the mantissa's bits (0..19); 5-7 reach the exponent's and are read from the word shifted right by 12
# (bits 8..19). Every product is q x 2^-SHIFT, which the end multiplies back; g x of up to 2^29 fits.
SHIFT = tl.constexpr(50)


@triton.jit
def _x8(ptr, word_rows, k, K: tl.constexpr):
    """The eight values at each word's columns (word_rows [BLOCK_K/GROUP, GROUP/8], within the tile at
    column k; none past K) as fp32. bf16 (the engine's) in two 8-byte reads: one read serves four
    values, where one read a value made a thread's load instructions outnumber its words' three to one."""
    out = ()
    if ptr.dtype.element_ty == tl.bfloat16:
        inside = k + word_rows * 8 < K
        at = ptr.to(tl.pointer_type(tl.int64)) + k // 4 + word_rows * 2
        for half in tl.static_range(2):
            v = tl.load(at + half, mask=inside, other=0)
            for part in tl.static_range(2):
                bits = (v >> (32 * part)).to(tl.int32)
                out = out + ((bits << 16).to(tl.float32, bitcast=True), (bits & -65536).to(tl.float32, bitcast=True))
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
    return sq, gsum * (-8.0 * 2.0**-SHIFT), scaled


@triton.jit
def _dot8(p, s, x):
    """Per word [GT, GW, BLOCK_N] of words p: its group's scale s times 2^-SHIFT sum_j q_j x_j (x: `_xs`'s),
    from the offset on, one and and one multiply-add a weight."""
    high = p >> 12
    d = x[1][:, :, None]
    for j in tl.static_range(8):
        word = p
        if j >= 5:  # values 5-7 from the word >> 12: bits 8..19
            word = high
        d += (word & (15 << (4 * j - 12 * (j // 5)))).to(tl.float32, bitcast=True) * x[2][j][:, :, None]
    return d * s.to(tl.float32)[:, None, :]


@triton.jit
def _strip_at(rows, ROWS: tl.constexpr, B: tl.constexpr):
    """Where each row's first word (ROWS = K/8) or scale (ROWS = K/GROUP) lies in strips of B rows
    ([N/B, ROWS, B]: `gemv4.pack_int4`); the next one of the row is B further."""
    return (rows // B) * (ROWS * B) + rows % B


@triton.jit
def _strips(w_ptr, s_ptr, rows, word_rows, K: tl.constexpr, GROUP: tl.constexpr, GT: tl.constexpr, B: tl.constexpr):
    """Pointers to the words [GT, GW, BLOCK_N] and scales [GT, BLOCK_N] of these rows' first tile."""
    w = w_ptr + word_rows[:, :, None] * B + _strip_at(rows, K // 8, B)[None, None, :]
    s = s_ptr + tl.arange(0, GT)[:, None] * B + _strip_at(rows, K // GROUP, B)[None, :]
    return w, s


@triton.jit
def _tile4(
    w_ptrs, s_ptrs, k, K: tl.constexpr, GROUP: tl.constexpr, BLOCK_K: tl.constexpr, B: tl.constexpr, EVEN: tl.constexpr
):
    """The packed words [BLOCK_K/GROUP, GROUP/8, BLOCK_N] and group scales [BLOCK_K/GROUP, BLOCK_N] of
    the tile at column k (word row k/8 + i holds columns k + 8i .. k + 8i + 7 of its row); EVEN: the
    tile lies inside K."""
    if EVEN:
        p = tl.load(w_ptrs + (k // 8) * B)
        s = tl.load(s_ptrs + (k // GROUP) * B)
    else:
        inside = k // GROUP + tl.arange(0, BLOCK_K // GROUP) < K // GROUP
        p = tl.load(w_ptrs + (k // 8) * B, mask=inside[:, None, None], other=0)
        s = tl.load(s_ptrs + (k // GROUP) * B, mask=inside[:, None], other=0.0)
    return p, s


@triton.jit
def _words(
    ptrs,
    k,
    K: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_K: tl.constexpr,
    B: tl.constexpr,
    EVEN: tl.constexpr,
    PAIR: tl.constexpr,
    SUB: tl.constexpr,
):
    """The words and scales at column k of each row block this program owns (ptrs: `_strips`' of each):
    a, its pair b, and the second block's a and b (c, d) when SUB is 2; absent ones repeat a."""
    wa, wsa, wb, wsb, wc, wsc, wd, wsd = ptrs
    pa, sa = _tile4(wa, wsa, k, K, GROUP, BLOCK_K, B, EVEN)
    pb, sb, pc, sc, pd, sd = pa, sa, pa, sa, pa, sa
    if PAIR != 0:
        pb, sb = _tile4(wb, wsb, k, K, GROUP, BLOCK_K, B, EVEN)
    if SUB == 2:
        pc, sc = _tile4(wc, wsc, k, K, GROUP, BLOCK_K, B, EVEN)
        if PAIR != 0:
            pd, sd = _tile4(wd, wsd, k, K, GROUP, BLOCK_K, B, EVEN)
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
def _loop(
    acc,
    w0,
    w1,
    x0,
    ptrs,
    x_ptr,
    g_ptr,
    word_rows,
    K: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_K: tl.constexpr,
    B: tl.constexpr,
    PAIR: tl.constexpr,
    SUB: tl.constexpr,
    HAS_G: tl.constexpr,
    NORM: tl.constexpr,
    AHEAD: tl.constexpr,
):
    """The products over K from the first tile on (w0: its words, x0: its x; w1: the second tile's words
    when AHEAD is 2), x one tile ahead and the words AHEAD tiles ahead: the next reads are requested
    before this tile's products. A tile's words cost fewer registers than its x, so reading them two
    ahead keeps more in flight for little. Two tiles a pass, so nothing read ahead is copied between
    the loop's variables (an odd tile goes first)."""
    TILES: tl.constexpr = (K + BLOCK_K - 1) // BLOCK_K
    if TILES % 2 == 1:
        w2 = _words(ptrs, AHEAD * BLOCK_K, K, GROUP, BLOCK_K, B, False, PAIR, SUB)
        x1 = _xs(x_ptr, g_ptr, word_rows, BLOCK_K, K, HAS_G)
        acc = _add(acc, (w0, x0), PAIR, SUB, NORM)
        if AHEAD == 1:
            w0 = w2
        else:
            w0, w1 = w1, w2
        x0 = x1
    for k in range((TILES % 2) * BLOCK_K, K, 2 * BLOCK_K):
        wa = _words(ptrs, k + AHEAD * BLOCK_K, K, GROUP, BLOCK_K, B, False, PAIR, SUB)
        x1 = _xs(x_ptr, g_ptr, word_rows, k + BLOCK_K, K, HAS_G)
        acc = _add(acc, (w0, x0), PAIR, SUB, NORM)
        wb = _words(ptrs, k + (AHEAD + 1) * BLOCK_K, K, GROUP, BLOCK_K, B, False, PAIR, SUB)
        x0 = _xs(x_ptr, g_ptr, word_rows, k + 2 * BLOCK_K, K, HAS_G)
        if AHEAD == 1:
            acc = _add(acc, (wa, x1), PAIR, SUB, NORM)
            w0 = wb
        else:
            acc = _add(acc, (w1, x1), PAIR, SUB, NORM)
            w0, w1 = wa, wb
    return acc


@triton.jit
def _sums(a, b, PAIR: tl.constexpr):
    """A row block's sums over its words (and its pair's), scaled back by 2^SHIFT."""
    ya = tl.sum(tl.sum(a, axis=1), axis=0) * 2.0**SHIFT
    yb = ya
    if PAIR != 0:
        yb = tl.sum(tl.sum(b, axis=1), axis=0) * 2.0**SHIFT
    return ya, yb


@triton.jit
def _gemv4_kernel(
    x_ptr,
    w_ptr,
    s_ptr,
    g_ptr,
    b_ptr,
    r_ptr,
    y_ptr,
    pos_ptr,
    freq_ptr,
    eps,
    rope_scale,
    K: tl.constexpr,
    GROUP: tl.constexpr,
    HAS_G: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    NORM: tl.constexpr,
    PAIR: tl.constexpr,
    PERIOD: tl.constexpr,
    ROPE_ROWS: tl.constexpr,
    RESIDUAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
    SUB: tl.constexpr,
    B: tl.constexpr,
    AHEAD: tl.constexpr = 1,
):
    # AHEAD: tiles of words read ahead of the one multiplied (1 or 2; x is read one tile ahead).
    # SUB row blocks a program (virtual programs SUB * pid + i): each x value a thread reads serves
    # SUB times as many words.
    pid = tl.program_id(0) * SUB
    HALF: tl.constexpr = PERIOD // 2
    GT: tl.constexpr = BLOCK_K // GROUP  # groups a tile
    GW: tl.constexpr = GROUP // 8  # word rows a group
    word_rows = tl.arange(0, GT)[:, None] * GW + tl.arange(0, GW)[None, :]  # [GT, GW], within the tile
    rows = _rows(pid, PAIR, PERIOD, BLOCK_N)
    rows2 = _rows(pid + 1, PAIR, PERIOD, BLOCK_N)
    wa, sa = _strips(w_ptr, s_ptr, rows, word_rows, K, GROUP, GT, B)
    wb, sb = _strips(w_ptr, s_ptr, rows + HALF, word_rows, K, GROUP, GT, B)
    wc, sc = _strips(w_ptr, s_ptr, rows2, word_rows, K, GROUP, GT, B)
    wd, sd = _strips(w_ptr, s_ptr, rows2 + HALF, word_rows, K, GROUP, GT, B)
    ptrs = wa, sa, wb, sb, wc, sc, wd, sd
    # The first tile's weights do not depend on the previous kernel: read them before waiting.
    words = _words(ptrs, 0, K, GROUP, BLOCK_K, B, K % BLOCK_K == 0, PAIR, SUB)
    words1 = words
    if AHEAD == 2:
        words1 = _words(ptrs, BLOCK_K, K, GROUP, BLOCK_K, B, False, PAIR, SUB)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    zero = tl.zeros([GT, GW, BLOCK_N], tl.float32)
    acc = zero, zero, zero, zero, tl.zeros([GT, GW], tl.float32)
    x0 = _xs(x_ptr, g_ptr, word_rows, 0, K, HAS_G)
    acc = _loop(
        acc, words, words1, x0, ptrs, x_ptr, g_ptr, word_rows, K, GROUP, BLOCK_K, B, PAIR, SUB, HAS_G, NORM, AHEAD
    )
    a, b, c, d, sq = acc
    sq = tl.sum(sq, axis=1)
    ya, yb = _sums(a, b, PAIR)
    out = (b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale)  # `_epilogue`'s
    _epilogue(ya, yb, sq, pid, rows, out, K, HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)
    if SUB == 2:
        ya, yb = _sums(c, d, PAIR)
        _epilogue(ya, yb, sq, pid + 1, rows2, out, K, HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)


@triton.jit
def _prompt4_kernel(
    x_ptr,
    w_ptr,
    s_ptr,
    y_ptr,
    M,
    N: tl.constexpr,
    K: tl.constexpr,
    GROUP: tl.constexpr,
    B: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """y [M, N] (fp32) = x [M, K] (bf16) times the 4-bit weight's transpose, for prompts: a group's
    integers as bf16 (exact) through the tensor cores against x (products exact, sums fp32), times the
    group's scales, so the result is the fp32 product with the dequantized weight up to summation order.
    fp32 x (the interpreter's tests: its bf16 products are not exact) multiplies in fp32 throughout."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    GW: tl.constexpr = GROUP // 8
    w_at = w_ptr + tl.arange(0, GW)[:, None] * B + _strip_at(n, K // 8, B)[None, :]
    s_at = s_ptr + _strip_at(n, K // GROUP, B)
    x_at = x_ptr + m[:, None] * K + tl.arange(0, GROUP)[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for g in range(0, K // GROUP):
        p = tl.load(w_at + g * GW * B, mask=(n < N)[None, :], other=0)  # [GW, BLOCK_N] words
        u = (p[:, None, :] >> (4 * tl.arange(0, 8))[None, :, None]) & 15  # input 8 w + j at [w, j]
        q = (tl.reshape(u, [GROUP, BLOCK_N]) - 8).to(tl.float32).to(x_ptr.dtype.element_ty)
        xg = tl.load(x_at + g * GROUP, mask=(m < M)[:, None], other=0.0)
        s = tl.load(s_at + g * B, mask=n < N, other=0.0).to(tl.float32)
        if x_ptr.dtype.element_ty == tl.float32:
            part = tl.dot(xg, q, input_precision="ieee")
        else:
            part = tl.dot(xg, q)
        acc += part * s[None, :]
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc, mask=(m < M)[:, None] & (n < N)[None, :])


# The one-token Triton program itself, by a public name: a study compiles it apart (to SASS) or swaps its
# `_dot8` in a copy of this file's source; gemv4.py launches this same object.
kernel = _gemv4_kernel
