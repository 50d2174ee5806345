"""This machine's memory bandwidth and fp32 matmul rate, as torch sees them.
.venv/bin/python studies/cpu_demo_sizing/machine.py"""

import time

import torch

a = torch.randn(64_000_000)
t = time.time()
for _ in range(5):
    a.clone()
print(f"copy {5 * 2 * a.numel() * 4 / (time.time() - t) / 1e9:.1f} GB/s")
x, y = torch.randn(1024, 1024), torch.randn(1024, 1024)
t = time.time()
for _ in range(20):
    x @ y
print(f"matmul {20 * 2 * 1024**3 / (time.time() - t) / 1e9:.1f} GFLOPS")
