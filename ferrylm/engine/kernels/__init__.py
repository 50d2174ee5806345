"""The engine's GPU kernels (Triton's kernel language) and torch's int4 layers: the bf16 matrix-vector
product (gemv), the 4-bit one (gemv4, its kernel in gemv4_kernel), the layers
that run them (linear), the greedy choice (greedy), int4."""
