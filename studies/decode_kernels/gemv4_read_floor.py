"""How fast the 4-bit kernel's weight reads alone can go on this GPU: the gate/up and down words read
tile by tile as `gemv4` reads them (one tile ahead, the same grid) but only xor-ed together, in
`pack_int4`'s strips and in other layouts, against the whole kernel on the same words. What the
kernel's arithmetic costs on top of its reads, and what the layout costs the reads; and the same bytes
read by the plainest kernel and by torch's sum (`stream`), for what a read of that size reaches; and
the plain read, the strips' read and the kernel back to back on copies of the words (`back_to_back`),
without do_bench's flush.

    python3 studies/decode_kernels/gemv4_read_floor.py --out gemv4_read_floor_h100.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl
from common import _stream, back_to_back

from ferrylm.shapes import HIDDEN, PRODUCTS, VOCAB, epilogues


@triton.jit
def _read_only(
    w_ptr,
    y_ptr,
    N: tl.constexpr,
    K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    B: tl.constexpr,
    TILED: tl.constexpr,
    AHEAD: tl.constexpr,
):
    """B: strips of B rows ([N/B, K/8, B]; B = N is plain input-major [K/8, N]); TILED: strips of 8 rows
    cut into chunks of BLOCK_K inputs, chunk-major ([K/BLOCK_K, N/8, BLOCK_K/8, 8]), so the programs
    running together read one contiguous span. AHEAD: tiles in flight (1, as the kernel, or 2)."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    if TILED:
        w = w_ptr + tl.arange(0, BLOCK_K // 8)[:, None] * 8 + ((rows // 8) * BLOCK_K + rows % 8)[None, :]
        step: tl.constexpr = N * BLOCK_K // 8
    else:
        w = w_ptr + tl.arange(0, BLOCK_K // 8)[:, None] * B + ((rows // B) * (K // 8 * B) + rows % B)[None, :]
        step: tl.constexpr = BLOCK_K // 8 * B
    t = tl.load(w)
    acc = tl.zeros([BLOCK_K // 8, BLOCK_N], tl.int32)
    if AHEAD == 2:
        u = tl.load(w + step)
        for i in range(2, K // BLOCK_K):
            v = tl.load(w + i * step)
            acc ^= t
            t = u
            u = v
        acc ^= u
    else:
        for i in range(1, K // BLOCK_K):  # one tile ahead, as the kernel reads
            u = tl.load(w + i * step)
            acc ^= t
            t = u
    acc ^= t
    tl.store(y_ptr + rows, tl.xor_sum(acc, axis=0))


def stream(words: torch.Tensor, block: int = 4096) -> dict:
    """The same number of bytes read by the plainest kernel, and by torch's sum, timed the same way:
    what a read of this size reaches on this GPU with do_bench's flushed L2 and the launch inside."""
    from triton.testing import do_bench

    flat = words.reshape(-1)[: words.numel() // block * block]
    y = torch.empty(flat.numel() // block, device=flat.device, dtype=torch.int32)
    out = {}
    for label, fn in (
        ("stream_1d", lambda: _stream[(y.numel(),)](flat, y, block, num_warps=8)),
        ("torch_sum", lambda: flat.view(torch.float32).sum()),
    ):
        ms = do_bench(fn)
        out[label] = {"us": ms * 1e3, "tb_s": flat.numel() * 4 / ms / 1e9}
    return out


def main() -> None:
    from triton.testing import do_bench

    from ferrylm.engine.kernels.gemv import Launch
    from ferrylm.engine.kernels.gemv4 import gemv4, pack_int4
    from ferrylm.engine.kernels.int4 import round_to_nearest_int4

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = {}
    for name, cfg in (("w13", (8, 512, 4, 1)), ("w2", (8, 1024, 4, 1))):
        (n, k), e = PRODUCTS[name], epilogues()[name]
        q, s = round_to_nearest_int4(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, 128)
        packed, scales = pack_int4(q, s)
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        extra = {"residual": torch.randn(n, device="cuda", dtype=torch.bfloat16)} if e.residual else {}
        g = torch.rand(k, device="cuda", dtype=torch.bfloat16) + 0.5 if e.norm_eps is not None else None
        bn, bk, warps, sub = cfg
        y = torch.empty(n, device="cuda", dtype=torch.int32)
        row = {"bytes": packed.numel() * 4, "config": cfg}
        # The same bytes read in each layout's order (what they hold does not matter here).
        # (block_k divides K in every row: the loop reads whole tiles only.)
        for label, block_n, block_k, nw, b, tiled, ahead in (
            ("read_only_strips", bn, bk, warps, 8, False, 1),
            ("read_only_strips_two_ahead", bn, bk, warps, 8, False, 2),
            ("read_only_strips_block_n_16_8_warps", 16, bk, 8, 8, False, 1),
            ("read_only_strips_block_k_128", bn, 128, warps, 8, False, 1),
            ("read_only_input_major", bn, bk, warps, n, False, 1),
            ("read_only_chunk_major", bn, bk, warps, 8, True, 1),
            ("read_only_chunk_major_block_n_32", 32, bk, warps, 8, True, 1),
        ):
            ms = do_bench(
                lambda: _read_only[(n // block_n,)](packed, y, n, k, block_n, block_k, b, tiled, ahead, num_warps=nw)
            )
            row[label] = {"us": ms * 1e3, "tb_s": row["bytes"] / ms / 1e9}
        ms = do_bench(lambda: gemv4(x, packed, scales, 128, None, Launch(bn, bk, warps), e, g, sub=sub, **extra))
        row["gemv4"] = {"us": ms * 1e3, "tb_s": row["bytes"] / ms / 1e9}
        row.update(stream(packed))
        # The same back to back on copies of the words (the scales shared: 3 % of the bytes).
        copies = [packed] + [packed.clone() for _ in range(-(-(256 << 20) // row["bytes"]))]
        flat = [c.reshape(-1)[: c.numel() // 4096 * 4096] for c in copies]
        ys = torch.empty(flat[0].numel() // 4096, device="cuda", dtype=torch.int32)
        for label, run in (
            ("b2b_stream_1d", lambda i: _stream[(ys.numel(),)](flat[i], ys, 4096, num_warps=8)),
            (
                "b2b_read_only_strips",
                lambda i: _read_only[(n // bn,)](copies[i], y, n, k, bn, bk, 8, False, 1, num_warps=warps),
            ),
            (
                "b2b_gemv4",
                lambda i: gemv4(x, copies[i], scales, 128, None, Launch(bn, bk, warps), e, g, sub=sub, **extra),
            ),
            (
                "b2b_gemv4_pdl",
                lambda i: gemv4(
                    x, copies[i], scales, 128, None, Launch(bn, bk, warps, pdl=True), e, g, sub=sub, **extra
                ),
            ),
            (
                "b2b_gemv4_ahead_2",
                lambda i: gemv4(
                    x, copies[i], scales, 128, None, Launch(bn, bk, warps), e, g, sub=sub, ahead=2, **extra
                ),
            ),
        ):
            row[label] = back_to_back(run, len(copies), row["bytes"])
        copies = flat = None  # their memory back before the next shape (the lambdas above are done with them)
        rows[name] = row
        print(name, json.dumps(row), flush=True)
    # The bf16 output layer's size (1.09 GB): the same reads long enough for the launch and ramp not to count.
    big = [torch.empty(VOCAB * HIDDEN // 2, device="cuda", dtype=torch.int32) for _ in range(2)]
    rows["lm_head_bytes"] = stream(big[0])
    ys = torch.empty(big[0].numel() // 4096, device="cuda", dtype=torch.int32)
    rows["lm_head_bytes"]["b2b_stream_1d"] = back_to_back(
        lambda i: _stream[(ys.numel(),)](big[i], ys, 4096, num_warps=8), 2, big[0].numel() * 4, rounds=5
    )
    print("lm_head_bytes", json.dumps(rows["lm_head_bytes"]), flush=True)
    Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "shapes": rows}, indent=2))


if __name__ == "__main__":
    main()
