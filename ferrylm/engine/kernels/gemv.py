"""A batch-1 matrix-vector kernel for the GPU engine's bf16 linear layers, written in the Triton
kernel language (not the Triton inference server of serve/triton_server.py).

At one token per step every linear layer is y = W x with each weight read once, so a layer's time is
its bytes over the bandwidth the kernel reaches. cuBLAS stays well short of that floor on a 7B decode;
much of the loss is at kernel boundaries, where a product ramps up and drains and the next starts
only after it has flushed. Two things here:

- each program owns `block_n` rows and walks K in `block_k`-wide tiles (masked, so a tile may be
  wider than K), the configuration tuned per weight shape when the engine is built;
- programmatic dependent launch (Hopper and newer): the kernel is launched while the previous one
  still runs, reads its first weight tile, which does not depend on that kernel, and only then waits
  for it (`gdc_wait`) before reading x.

What each of these, and the epilogues below, gained on an H200 is in docs/performance.md ("Batch-1
decode"); `decode_step.py` builds the one-token step `Engine(gemv=True)` runs on them.

`Epilogue` says what a product does around itself: an RMS norm before it (its weight folded into w,
the kernel sums x's squares as it reads x and scales its dot products at the end), SiLU's gate or
rotary positions (each program owns two row blocks, gate and up, or a head's two halves), a residual
add after it. (Recomputing the gate's SiLU on the input side, in every program, measured slower.)

The kernel is reached through a torch custom op (`linear.py`), so `torch.compile` captures it in the
engine's CUDA graph like any other kernel. Without a GPU the engine keeps `F.linear`; the tests run the
kernel through Triton's interpreter.
"""

from typing import NamedTuple

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: linear.GemvLinear is never built there
    triton = None

if triton is not None:

    @triton.jit
    def _round(v, like_ptr):
        """v rounded to the output dtype (where transformers rounds), back in fp32."""
        return v.to(like_ptr.dtype.element_ty).to(tl.float32)

    @triton.jit
    def _rows(pid, PAIR: tl.constexpr, PERIOD: tl.constexpr, BLOCK_N: tl.constexpr):
        """This program's first-half rows: rows r and r + PERIOD/2 of each PERIOD-row group when paired
        (SiLU's gate and up, RoPE's two halves)."""
        if PAIR == 0:
            return pid * BLOCK_N + tl.arange(0, BLOCK_N)
        per_group: tl.constexpr = (PERIOD // 2) // BLOCK_N
        return (pid // per_group) * PERIOD + (pid % per_group) * BLOCK_N + tl.arange(0, BLOCK_N)

    @triton.jit
    def _epilogue(ya, yb, sq, pid, rows, out, K, HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N):
        """Everything after the dot products ya (and yb, the paired rows; sq: x's squares, for NORM):
        shared by the bf16 kernel here and the 4-bit one of gemv4.py. `out`: the kernel's (b_ptr, r_ptr,
        y_ptr, pos_ptr, freq_ptr, eps, rope_scale); the rest are its constexprs (a jit function called with
        constexpr values is compiled for them, annotated or not)."""
        b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale = out
        HALF: tl.constexpr = PERIOD // 2
        if NORM:  # RMS norm of x, its weight folded into w's columns: W (g * x / rms(x)) = (W g) x / rms(x)
            inv_rms = tl.rsqrt(tl.sum(sq, axis=0) / K + eps)
            ya = ya * inv_rms
            if PAIR != 0:
                yb = yb * inv_rms
        if HAS_BIAS:
            ya += tl.load(b_ptr + rows).to(tl.float32)
            if PAIR != 0:
                yb += tl.load(b_ptr + rows + HALF).to(tl.float32)
        if PAIR == 1:  # silu(gate) * up, written at the gate's rows: an output of N/2
            gate = _round(ya, y_ptr)
            tl.store(
                y_ptr + rows, (_round(gate * tl.sigmoid(gate), y_ptr) * _round(yb, y_ptr)).to(y_ptr.dtype.element_ty)
            )
        elif PAIR == 2:  # rotary positions on the rows below ROPE_ROWS (q and k heads of PERIOD = head_dim)
            per_group: tl.constexpr = HALF // BLOCK_N
            half_dim = (pid % per_group) * BLOCK_N + tl.arange(0, BLOCK_N)
            angle = tl.load(pos_ptr).to(tl.float32) * tl.load(freq_ptr + half_dim)
            cos, sin = _round(tl.cos(angle) * rope_scale, y_ptr), _round(tl.sin(angle) * rope_scale, y_ptr)
            ya, yb = _round(ya, y_ptr), _round(yb, y_ptr)
            rope = rows < ROPE_ROWS
            tl.store(y_ptr + rows, tl.where(rope, ya * cos - yb * sin, ya).to(y_ptr.dtype.element_ty))
            tl.store(y_ptr + rows + HALF, tl.where(rope, yb * cos + ya * sin, yb).to(y_ptr.dtype.element_ty))
        else:
            if RESIDUAL:  # the residual stream plus this layer's (rounded) output, as transformers adds
                ya = _round(ya, y_ptr) + tl.load(r_ptr + rows).to(tl.float32)
            tl.store(y_ptr + rows, ya.to(y_ptr.dtype.element_ty))

    @triton.jit
    def _gemv_kernel(
        x_ptr,
        w_ptr,
        b_ptr,
        r_ptr,
        y_ptr,
        pos_ptr,
        freq_ptr,
        eps,
        rope_scale,
        K: tl.constexpr,
        HAS_BIAS: tl.constexpr,
        NORM: tl.constexpr,
        PAIR: tl.constexpr,
        PERIOD: tl.constexpr,
        ROPE_ROWS: tl.constexpr,
        RESIDUAL: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        EVEN_K: tl.constexpr,
        PDL: tl.constexpr,
    ):
        pid = tl.program_id(0)
        HALF: tl.constexpr = PERIOD // 2
        rows = _rows(pid, PAIR, PERIOD, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        a_ptrs = w_ptr + rows[:, None].to(tl.int64) * K + cols[None, :]
        b_ptrs = a_ptrs + HALF * K
        # The first weight tiles do not depend on the previous kernel: read them before waiting.
        if EVEN_K:
            wa = tl.load(a_ptrs)
            if PAIR != 0:
                wb = tl.load(b_ptrs)
        else:
            wa = tl.load(a_ptrs, mask=cols[None, :] < K, other=0.0)
            if PAIR != 0:
                wb = tl.load(b_ptrs, mask=cols[None, :] < K, other=0.0)
        if PDL:
            tl.extra.cuda.gdc_wait()  # the previous kernel (which wrote x) has finished
            tl.extra.cuda.gdc_launch_dependents()  # and the next one may start its own weight reads
        if EVEN_K:
            x = tl.load(x_ptr + cols).to(tl.float32)
        else:
            x = tl.load(x_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
        acc_a = wa.to(tl.float32) * x[None, :]
        if PAIR != 0:
            acc_b = wb.to(tl.float32) * x[None, :]
        sq = x * x
        for k in range(BLOCK_K, K, BLOCK_K):
            if EVEN_K:
                wa = tl.load(a_ptrs + k)
                x = tl.load(x_ptr + k + cols).to(tl.float32)
                if PAIR != 0:
                    wb = tl.load(b_ptrs + k)
            else:
                inside = k + cols < K
                wa = tl.load(a_ptrs + k, mask=inside[None, :], other=0.0)
                x = tl.load(x_ptr + k + cols, mask=inside, other=0.0).to(tl.float32)
                if PAIR != 0:
                    wb = tl.load(b_ptrs + k, mask=inside[None, :], other=0.0)
            acc_a += wa.to(tl.float32) * x[None, :]
            if PAIR != 0:
                acc_b += wb.to(tl.float32) * x[None, :]
            if NORM:
                sq += x * x
        ya = tl.sum(acc_a, axis=1)
        if PAIR != 0:
            yb = tl.sum(acc_b, axis=1)
        else:
            yb = ya
        out = (b_ptr, r_ptr, y_ptr, pos_ptr, freq_ptr, eps, rope_scale)  # `_epilogue`'s
        _epilogue(ya, yb, sq, pid, rows, out, K, HAS_BIAS, NORM, PAIR, PERIOD, ROPE_ROWS, RESIDUAL, BLOCK_N)


def supports_pdl() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


SILU, ROPE = 1, 2  # the paired epilogues (0: none)


class Epilogue(NamedTuple):
    """What a kernel does around its product (`decode_step`): `norm_eps` (not None): x is RMS-normalised
    first (its norm weight already folded into w); `pair`: SILU (w stacks gate over up: the output is
    silu(gate) * up, N/2 values) or ROPE (rotary positions on the first `rope_rows` rows, in groups of
    `period` = head_dim rows); `residual`: the output is added to a residual vector."""

    norm_eps: float | None = None
    pair: int = 0
    period: int = 0
    rope_rows: int = 0
    rope_scale: float = 1.0
    residual: bool = False

    def kernel_args(self, k: int, period: int, has_bias: bool) -> dict:
        """This epilogue as both kernels' arguments of the same names (with the product's K, its rope
        period and whether a bias is read)."""
        return dict(
            eps=0.0 if self.norm_eps is None else self.norm_eps,
            rope_scale=self.rope_scale,
            K=k,
            HAS_BIAS=has_bias,
            NORM=self.norm_eps is not None,
            PAIR=self.pair,
            PERIOD=period,
            ROPE_ROWS=self.rope_rows,
            RESIDUAL=self.residual,
        )

    def op_args(self) -> dict:
        """This epilogue as the custom op's arguments (its schema takes no NamedTuple)."""
        return dict(
            norm_eps=self.norm_eps,
            pair=self.pair,
            period=self.period,
            rope_rows=self.rope_rows,
            rope_scale=self.rope_scale,
            has_residual=self.residual,
        )


class Launch(NamedTuple):
    """How both matrix-vector kernels are launched: `block_n` rows and `block_k` inputs a tile, the warps and
    pipeline stages of a program, and `pdl`: programmatic dependent launch (Hopper), overlapping the previous
    kernel's tail."""

    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 1
    pdl: bool = False

    def kernel_args(self) -> dict:
        """This launch as both kernels' arguments of the same names."""
        extra = {"launch_pdl": True} if self.pdl else {}
        return dict(
            BLOCK_N=self.block_n,
            BLOCK_K=self.block_k,
            PDL=self.pdl,
            num_warps=self.num_warps,
            num_stages=self.num_stages,
            **extra,
        )


def check_launch(what, n, k, x, launch: Launch, e: Epilogue, residual, pos, inv_freq) -> tuple[int, int]:
    """(programs, period) of a kernel over an [n, k] weight, or a ValueError saying what does not fit."""
    block_n, block_k = launch.block_n, launch.block_k
    if block_n & (block_n - 1) or block_k & (block_k - 1):
        raise ValueError(f"{what}: block_n={block_n} and block_k={block_k} must be powers of two")
    rows_per_program = 2 * block_n if e.pair else block_n
    period = e.period if e.pair else n
    if n % rows_per_program or n % period or (e.pair and period % rows_per_program):
        raise ValueError(f"{what}: {n} rows (period {period}) do not split into programs of block_n={block_n}")
    if x.numel() != k:
        raise ValueError(f"{what}: input of {x.numel()} values for a [{n}, {k}] weight")
    if e.residual != (residual is not None) or (e.pair == ROPE) != (pos is not None and inv_freq is not None):
        raise ValueError(f"{what}: a residual vector goes with a residual epilogue, pos and inv_freq with ROPE")
    return n // rows_per_program, period


def gemv(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    launch: Launch,
    epilogue: Epilogue = Epilogue(),
    residual: torch.Tensor | None = None,
    pos: torch.Tensor | None = None,
    inv_freq: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = w @ x (+ bias) for a vector x [K] and w [N, K], launched as `launch` says, with `epilogue` around it
    (ROPE reads the position `pos` [1] and `inv_freq`; `residual` [N] is added when the epilogue says so)."""
    n, k = w.shape
    e = epilogue
    programs, period = check_launch("gemv", n, k, x, launch, e, residual, pos, inv_freq)
    y = torch.empty(n // 2 if e.pair == SILU else n, device=x.device, dtype=x.dtype)
    _gemv_kernel[(programs,)](
        x,
        w,
        w if bias is None else bias,
        w if residual is None else residual,
        y,
        w if pos is None else pos,
        w if inv_freq is None else inv_freq,
        **e.kernel_args(k, period, bias is not None),
        **launch.kernel_args(),
        EVEN_K=k % launch.block_k == 0,
    )
    return y


def gemv_reference(x, w, bias=None, epilogue: Epilogue = Epilogue(), residual=None, pos=None, inv_freq=None):
    """What `gemv` computes, in plain torch (fp32): the tests' and the tuner's reference."""
    e, x, w = epilogue, x.float(), w.float()
    y = w @ x
    if e.norm_eps is not None:
        y = y * torch.rsqrt(x.pow(2).mean() + e.norm_eps)
    if bias is not None:
        y = y + bias.float()
    if e.pair == SILU:
        gate, up = y.chunk(2)
        return torch.nn.functional.silu(gate) * up
    if e.pair == ROPE:
        from ..fused import rotate_half

        angle = pos.float() * inv_freq.float()
        emb = torch.cat([angle, angle])
        heads = y[: e.rope_rows].view(-1, e.period)
        roped = heads * emb.cos() * e.rope_scale + rotate_half(heads) * emb.sin() * e.rope_scale
        return torch.cat([roped.reshape(-1), y[e.rope_rows :]])
    return y + residual.float() if e.residual else y


CONFIG_KEYS = ("block_n", "block_k", "num_warps", "num_stages")  # a tuned configuration's keys
