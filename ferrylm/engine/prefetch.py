"""The next small product's weights pulled into the L2 cache while the kernel before it runs.

At one token the q/k/v and o products of a 7B layer (8 and 7 MB at 4 bits) are too small to reach
the memory's bandwidth: each ramps up and drains, most of its time waiting on the first reads of
every program (docs/benchmarks.md). Their weights do not depend on anything the step computes, so a
kernel that runs before them can ask for them early: down asks for the next layer's q/k/v, the
attention kernel (which reads little itself) for o. Each program requests its share in chunks of
CHUNK bytes with Hopper's bulk L2 prefetch, one instruction a chunk and no registers held, then goes
on with its own work; when the small product runs, its reads hit the L2.

`plan` says which layer asks for which; `args` turns a target into a kernel's arguments (pointer,
bytes, chunks a program; 0 chunks: nothing asked, as on GPUs before Hopper and in the interpreter).
"""
from __future__ import annotations

import os
from typing import Optional

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU-only install: never called there
    triton = None

CHUNK = 4096   # bytes a prefetch instruction asks for (a multiple of 16)

if triton is not None:
    @triton.jit
    def _prefetch_l2(ptr, nbytes, part, N: tl.constexpr):
        """Ask for chunks part * N .. part * N + N - 1 of the nbytes at ptr (16-byte aligned, at least
        CHUNK) into the L2, from the program's first thread only; chunks past the end ask for the last
        one again."""
        base = ptr.to(tl.pointer_type(tl.int8))
        for i in range(N):
            at = tl.minimum((part * N + i).to(tl.int64) * 4096, nbytes - 4096)
            tl.inline_asm_elementwise(
                "{ .reg .pred first; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 first, t, 0;\n\t"
                "@first cp.async.bulk.prefetch.L2.global [$1], 4096; mov.u32 $0, 0; }",
                "=r,l", [base + at], dtype=tl.int32, is_pure=False, pack=1)


def supported(device: torch.device) -> bool:
    """Bulk L2 prefetch: Hopper (sm_90) and newer, compiled (the interpreter runs no PTX)."""
    return (device.type == "cuda" and os.environ.get("TRITON_INTERPRET") != "1"
            and torch.cuda.get_device_capability(device)[0] >= 9)


def args(target: Optional[torch.Tensor], programs: int) -> tuple[Optional[torch.Tensor], int, int]:
    """(tensor, bytes, chunks a program) for a kernel of `programs` programs to ask for `target`;
    (None, 0, 0) for none, or a target the bulk prefetch cannot take (unaligned, under a chunk)."""
    if target is None:
        return None, 0, 0
    nbytes = target.numel() * target.element_size()
    if nbytes < CHUNK or nbytes % 16 or target.data_ptr() % 16 or not target.is_contiguous():
        return None, 0, 0
    per_program = -(-nbytes // (CHUNK * programs))
    return target, nbytes, 1 << (per_program - 1).bit_length()


def plan(decoder) -> None:
    """Which kernel of the one-token step asks for which weights (`decode_step.decode_step`): each 4-bit
    down product for the next layer's q/k/v words, each layer's attention for its o words. Nothing on
    GPUs without the bulk prefetch, and nothing for bf16 layers (their q/k/v and o, 60 MB a layer,
    would not stay in the L2 while down reads 136 MB)."""
    layers = decoder.layers
    on = supported(decoder.embed.device)
    for i, layer in enumerate(layers):
        nxt = layers[i + 1].wqkv if i + 1 < len(layers) else None
        layer.w2.prefetch = getattr(nxt, "packed", None) if on and hasattr(layer.w2, "packed") else None
        layer.attention_prefetch = getattr(layer.wo, "packed", None) if on else None
