"""A batch-1 matrix-vector kernel for the GPU engine's bf16 linear layers, written in Triton.

At one token per step every linear layer is y = W x with each weight read once, so a layer's time is
its bytes over the bandwidth the kernel reaches. cuBLAS reached 58 % of the H200's floor on the 7B
decode (2.55 s for 512 tokens); much of the loss is at kernel boundaries, where a product ramps up and
drains and the next starts only after it has flushed. Two things here:

- each program owns `block_n` rows and walks K in `block_k`-wide tiles (masked, so a tile may be
  wider than K), the configuration tuned per weight shape when the engine is built;
- programmatic dependent launch (Hopper and newer): the kernel is launched while the previous one
  still runs, reads its first weight tile, which does not depend on that kernel, and only then waits
  for it (`gdc_wait`) before reading x.

Measured on an H200 for 512 tokens of a 7B model (docs/benchmarks.md): 2.59 s on cuBLAS, 2.30 s on
this kernel, 2.21 s with PDL on it and on inductor's kernels (what `Engine(gemv=True)` does).
(Fusing the RMS norms and the SiLU gate into the kernel was slower, 3.35 s: every program
recomputes the whole input vector, and that work grows with the number of programs.)

The kernel is a torch custom op, so `torch.compile` captures it in the engine's CUDA graph like any
other kernel. Without a GPU the engine keeps `F.linear`; the tests run the kernel through Triton's
interpreter.
"""
import itertools
from typing import Optional

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: GemvLinear is never built there
    triton = None

if triton is not None:
    @triton.jit
    def _gemv_kernel(x_ptr, w_ptr, b_ptr, y_ptr, K: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, PDL: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        w_ptrs = w_ptr + rows[:, None].to(tl.int64) * K + cols[None, :]
        # The first weight tile does not depend on the previous kernel: read it before waiting.
        if EVEN_K:
            w = tl.load(w_ptrs)
        else:
            w = tl.load(w_ptrs, mask=cols[None, :] < K, other=0.0)
        if PDL:
            tl.extra.cuda.gdc_wait()              # the previous kernel (which wrote x) has finished
            tl.extra.cuda.gdc_launch_dependents()  # and the next one may start its own weight reads
        if EVEN_K:
            x = tl.load(x_ptr + cols)
        else:
            x = tl.load(x_ptr + cols, mask=cols < K, other=0.0)
        acc = w.to(tl.float32) * x.to(tl.float32)[None, :]
        for k in range(BLOCK_K, K, BLOCK_K):
            if EVEN_K:
                w = tl.load(w_ptrs + k)
                x = tl.load(x_ptr + k + cols)
            else:
                inside = k + cols < K
                w = tl.load(w_ptrs + k, mask=inside[None, :], other=0.0)
                x = tl.load(x_ptr + k + cols, mask=inside, other=0.0)
            acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
        y = tl.sum(acc, axis=1)
        if HAS_BIAS:
            y += tl.load(b_ptr + rows).to(tl.float32)
        tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty))


def supports_pdl() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def gemv(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], block_n: int, block_k: int,
         num_warps: int, num_stages: int, pdl: bool = False) -> torch.Tensor:
    """y = w @ x (+ bias) for a vector x [K] and w [N, K]; N must be a multiple of block_n."""
    n, k = w.shape
    if block_n & (block_n - 1) or block_k & (block_k - 1):
        raise ValueError(f"gemv: block_n={block_n} and block_k={block_k} must be powers of two")
    if n % block_n:
        raise ValueError(f"gemv: {n} rows are not a multiple of block_n={block_n}")
    if x.numel() != k:
        raise ValueError(f"gemv: input of {x.numel()} values for a [{n}, {k}] weight")
    y = torch.empty(n, device=x.device, dtype=x.dtype)
    launch = {"launch_pdl": True} if pdl else {}
    _gemv_kernel[(n // block_n,)](x, w, w if bias is None else bias, y, k, bias is not None, BLOCK_N=block_n,
                                  BLOCK_K=block_k, EVEN_K=k % block_k == 0, PDL=pdl, num_warps=num_warps,
                                  num_stages=num_stages, **launch)
    return y


@torch.library.custom_op("ferrylm::gemv", mutates_args=())
def gemv_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], block_n: int, block_k: int,
            num_warps: int, num_stages: int, pdl: bool) -> torch.Tensor:
    return gemv(x, w, bias, block_n, block_k, num_warps, num_stages, pdl)


@gemv_op.register_fake
def _(x, w, bias, block_n, block_k, num_warps, num_stages, pdl):
    return x.new_empty(w.shape[0])


CONFIG_KEYS = ("block_n", "block_k", "num_warps", "num_stages")


def candidates(n: int, k: int):
    """The configurations worth timing for an [n, k] weight."""
    for bn, bk, warps, stages in itertools.product((1, 2), (512, 1024, 2048, 4096), (4, 8), (1, 2)):
        if n % bn == 0 and bn * bk <= 8192 and bk <= triton.next_power_of_2(k):
            yield dict(zip(CONFIG_KEYS, (bn, bk, warps, stages)))


def tune(w: torch.Tensor, pdl: bool = False) -> dict:
    """The fastest configuration for this weight's shape (timed with the L2 flushed between runs,
    as in decode, where each weight is read once per token)."""
    from triton.testing import do_bench

    x = torch.randn(w.shape[1], device=w.device, dtype=w.dtype)
    want = torch.nn.functional.linear(x.float(), w.float())
    best, best_ms = None, float("inf")
    for cfg in candidates(*w.shape):
        got = gemv(x, w, None, pdl=pdl, **cfg)
        if (got.float() - want).abs().max() > 1e-2 * want.abs().max():
            raise RuntimeError(f"gemv {cfg} disagrees with F.linear on {tuple(w.shape)}")
        ms = do_bench(lambda: gemv(x, w, None, pdl=pdl, **cfg), warmup=5, rep=30)
        if ms < best_ms:
            best, best_ms = cfg, ms
    return {**best, "ms": best_ms}


class GemvLinear(torch.nn.Module):
    """A linear layer whose one-token inputs go through `gemv` with a fixed configuration; longer
    inputs (the prompt) through F.linear."""

    def __init__(self, linear: torch.nn.Linear, cfg: dict, pdl: bool = False):
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias
        self.cfg = {key: int(cfg[key]) for key in CONFIG_KEYS}
        self.pdl = pdl

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[:-1].numel() != 1:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        y = gemv_op(x.reshape(-1), self.weight, self.bias, pdl=self.pdl, **self.cfg)
        return y.reshape(*x.shape[:-1], -1)


def gemv_weights(decoder: torch.nn.Module, pdl: Optional[bool] = None, configs: Optional[dict] = None) -> dict:
    """Put every linear layer of the fused decoder (and its output layer) on `gemv`, one tuned
    configuration per weight shape (or `configs` {(n, k): cfg}); returns the configurations used."""
    pdl = supports_pdl() if pdl is None else pdl
    configs = dict(configs or {})
    from .fused import layer_linears

    for owner, name in layer_linears(decoder) + [(decoder, "lm_head")]:
        linear = getattr(owner, name)
        shape = tuple(linear.weight.shape)
        if shape not in configs:
            configs[shape] = tune(linear.weight.detach(), pdl)
        setattr(owner, name, GemvLinear(linear, configs[shape], pdl))
    return configs
