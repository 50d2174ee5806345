"""One 7B product on the 4-bit kernel (engine/gemv4.py), launched a few times after one warm-up: the
target for Nsight Compute, which then profiles one launch of the kernel alone.

    ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
        -k regex:gemv4_kernel -s 1 -c 1 python3 studies/decode_kernels/gemv4_ncu.py w13 16 256 4 2

Arguments: the product (w13: gate/up with its norm and SiLU, w2: down with its residual), then
block_n, block_k, num_warps and sub (defaults: the tuner's choice of the 2026-11-26 H200 run).
"""

import sys

import torch

from ferrylm.engine.kernels.gemv import Launch
from ferrylm.engine.kernels.gemv4 import gemv4, pack_int4
from ferrylm.engine.kernels.int4 import round_to_nearest_int4
from ferrylm.engine.tuning.choose import tuning_inputs
from ferrylm.shapes import PRODUCTS, epilogues

GROUP = 128
SHAPES = {
    "w13": (*PRODUCTS["w13"], epilogues()["w13"], (16, 256, 4, 2)),
    "w2": (*PRODUCTS["w2"], epilogues()["w2"], (8, 1024, 8, 2)),
}

which = sys.argv[1] if len(sys.argv) > 1 else "w13"
n, k, e, default = SHAPES[which]
block_n, block_k, warps, sub = [int(a) for a in sys.argv[2:6]] or default
torch.manual_seed(0)
q, s = round_to_nearest_int4(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02, GROUP)
packed, scales = pack_int4(q, s)
x, extra = tuning_inputs(n, k, scales, e)  # bf16 on the GPU, as the scales
g = torch.rand(k, device="cuda", dtype=torch.bfloat16) + 0.5 if e.norm_eps is not None else None
for _ in range(3):
    gemv4(x, packed, scales, GROUP, None, Launch(block_n, block_k, warps), e, g, sub=sub, **extra)
torch.cuda.synchronize()
print(which, dict(block_n=block_n, block_k=block_k, num_warps=warps, sub=sub), "done")
