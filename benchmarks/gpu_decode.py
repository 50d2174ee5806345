"""Batch-1 decode latency of a Qwen2.5-7B-shaped model (random bf16 weights) on one GPU; `--shape 1.5b`:
Qwen2.5-Coder-1.5B's widths.

    python3 benchmarks/gpu_decode.py --out results.json

128-token prompt, 512 new tokens (no early stop), greedy. Engines: transformers `generate()` with
its default dynamic cache; `generate()` with the static cache (which transformers compiles);
`ferrylm.engine.Engine` (static cache, decode step compiled with CUDA graphs, greedy
inside the graph), on the transformers model or on `FusedDecoder`, in bf16 (cuBLAS or the Triton
matrix-vector kernel) or with 4-bit weights. Floor: the bytes of every weight read once per token (the embedding table is
only gathered) over the GPU's peak HBM bandwidth.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from ferrylm.shapes import HIDDEN, INTERMEDIATE

PEAK_BANDWIDTH = {"H200": 4.8e12, "H100": 3.35e12}


# Weight-only FP8 for the decode comparison (only this benchmark uses it).
class Fp8WeightLinear(torch.nn.Module):
    """Weight-only FP8 (e4m3) linear: weights stored in 8 bits with a per-output-channel scale,
    cast to the activation dtype inside the compiled matmul. At batch 1 decode reads half the bytes
    of bf16; compute stays bf16."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1).clamp(min=1e-12) / 448.0
        self.weight = torch.nn.Parameter((w / scale[:, None]).to(torch.float8_e4m3fn), requires_grad=False)
        self.scale = torch.nn.Parameter(scale.to(linear.weight.dtype), requires_grad=False)
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.nn.functional.linear(x, self.weight.to(x.dtype)) * self.scale
        return out + self.bias if self.bias is not None else out


def fp8_weights(model, replacement=None) -> int:
    """Replace the decoder layers' linear layers with `replacement(linear)` (default
    `Fp8WeightLinear`); returns how many."""
    replacement = replacement or Fp8WeightLinear
    count = 0
    for mod in list(model.model.layers.modules()):
        for name, child in list(mod.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(mod, name, replacement(child))
                count += 1
    return count


def step_vs_prompt(decoder, ids: torch.Tensor, logits: torch.Tensor, variant: str, steps: int = 40) -> dict:
    """The prompt's last `steps` positions again, one token at a time through the decode step after a
    prefill of the rest (positions that span two of attention's 64-position chunks), against the
    prompt path's logits there: the largest difference and how often the argmax agrees."""
    n = ids.shape[1]
    with torch.no_grad():
        decoder.reset()
        decoder(ids[:, : n - steps], torch.arange(n - steps, device=ids.device))
        got = torch.stack(
            [
                decoder(ids[:, i : i + 1], torch.tensor([i], device=ids.device))[0, -1].float()
                for i in range(n - steps, n)
            ]
        )
    want = logits[n - steps :]
    return {
        f"step_vs_prompt_max_abs_{variant}": (got - want).abs().max().item(),
        f"step_vs_prompt_argmax_agreement_{variant}": agreement(got, want)[1],
    }


def agreement(logits: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """KL(ref ‖ logits) averaged over the positions, and how often their argmax agrees."""
    kl = torch.nn.functional.kl_div(logits.log_softmax(-1), ref.log_softmax(-1), log_target=True, reduction="batchmean")
    return kl.item(), (logits.argmax(-1) == ref.argmax(-1)).float().mean().item()


def shaped_model(shape: str):
    """Random bf16 weights of Qwen2.5-7B's shape, or of Qwen2.5-Coder-1.5B's widths (ferrylm/shapes.py)."""
    from ferrylm.shapes import QWEN25_CODER_1_5B, qwen7b_model

    if shape == "7b":
        return qwen7b_model()
    return qwen7b_model(**{k: v for k, v in QWEN25_CODER_1_5B.items() if k != "model_type"})


class Fp8W8A8Linear(torch.nn.Module):
    """W8A8 FP8 (e4m3) linear via torch._scaled_mm: weights per output channel, activations per token."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0
        self.weight = torch.nn.Parameter((w / scale).to(torch.float8_e4m3fn).t(), requires_grad=False)  # [in, out]
        self.scale_w = torch.nn.Parameter(scale.t().contiguous(), requires_grad=False)  # [1, out]
        self.bias = linear.bias

    def forward(self, x):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        sx = x2.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / 448.0
        out = torch._scaled_mm(
            (x2 / sx).to(torch.float8_e4m3fn),
            self.weight,
            scale_a=sx,
            scale_b=self.scale_w,
            out_dtype=torch.bfloat16,
            bias=self.bias,
        )
        return out.reshape(*shape[:-1], -1)


VARIANTS = {
    "untuned": ("transformers model, CUDA graphs, inductor defaults", dict(tune=False)),
    "tuned": ("transformers model, CUDA graphs, coordinate-descent tuning", dict()),
    "fp8-weight": ("tuned + FP8 weight-only linear layers", dict()),
    "fp8-w8a8": ("tuned + FP8 weights and activations through torch._scaled_mm", dict()),
    "fused": ("FusedDecoder (q/k/v and gate/up fused), tuned", dict(fused=True)),
    "fused-untuned": ("FusedDecoder, inductor defaults (cuBLAS matrix-vector)", dict(fused=True, tune=False)),
    "gemv": (
        "FusedDecoder on the Triton matrix-vector kernel (gemv.py: tuned per shape, PDL on Hopper)",
        dict(gemv=True, tune=False),
    ),
    "int4": (
        "FusedDecoder with W4A16 weights (round to nearest, --int4-group) on torch's int4 kernel",
        dict(fused=True),
    ),
    "int4-gemv": (
        "the same W4A16 weights on the 4-bit Triton matrix-vector kernel (gemv4.py) in the fused step",
        dict(gemv=True, tune=False),
    ),
}


def int4_kernel_error(group: int) -> float:
    """Relative max error of the CUDA int4 layer against its own dequantized weights (7B MLP shape):
    checks the packing on the GPU, where the suite cannot run it."""
    from ferrylm.engine.kernels.int4 import Int4WeightLinear, round_to_nearest_int4

    w = torch.randn(INTERMEDIATE, HIDDEN, device="cuda", dtype=torch.bfloat16) * 0.02
    q, scale = round_to_nearest_int4(w, group)
    deq = (q.float().reshape(INTERMEDIATE, -1, group) * scale.float()[..., None]).reshape(INTERMEDIATE, HIDDEN)
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    want = x.float() @ deq.t()
    got = Int4WeightLinear(q, scale, None, group)(x).float()
    return ((got - want).abs().max() / want.abs().max()).item()


def gemv4_kernel_error(group: int) -> float:
    """Relative max error of the 4-bit Triton kernel against its own dequantized weights (7B MLP shape,
    the gate/up product with its norm and SiLU epilogue)."""
    from ferrylm.engine.kernels.gemv import SILU, Epilogue, Launch
    from ferrylm.engine.kernels.gemv4 import gemv4, gemv4_reference, pack_int4
    from ferrylm.engine.kernels.int4 import round_to_nearest_int4

    w = torch.randn(2 * INTERMEDIATE, HIDDEN, device="cuda", dtype=torch.bfloat16) * 0.02
    q, scale = round_to_nearest_int4(w, group)
    (packed, scale), x = pack_int4(q, scale), torch.randn(HIDDEN, device="cuda", dtype=torch.bfloat16)
    g = torch.rand(HIDDEN, device="cuda", dtype=torch.bfloat16) + 0.5
    e = Epilogue(1e-6, SILU, 2 * INTERMEDIATE)
    want = gemv4_reference(x, packed, scale, group, None, e, g)
    got = gemv4(x, packed, scale, group, None, Launch(16, 256), e, g).float()
    return ((got - want).abs().max() / want.abs().max()).item()


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--new-tokens", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--variants",
        default="tuned,fused,fused-untuned,int4",
        help="Engine variants in order: "
        + "; ".join(f"{k}: {v[0]}" for k, v in VARIANTS.items())
        + " (one FP8 kind per run: they replace the model's layers)",
    )
    ap.add_argument("--shape", choices=("7b", "1.5b"), default="7b", help="the model's shape (random weights)")
    ap.add_argument("--int4-group", type=int, default=128)
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument(
        "--tuned-dir",
        help="the kernel engine's saved configurations (read, and written where it tunes); "
        "default: none, every run tunes",
    )
    args = ap.parse_args()
    from ferrylm.engine import Engine

    gpu = torch.cuda.get_device_name()
    model = shaped_model(args.shape)
    ids = torch.randint(100, 150000, (1, args.prompt), generator=torch.Generator().manual_seed(1)).cuda()
    weight_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "embed_tokens" not in n)
    bw = next((v for k, v in PEAK_BANDWIDTH.items() if k in gpu), None)
    result = {
        "gpu": gpu,
        "shape": args.shape,
        "torch": torch.__version__,
        "prompt_tokens": args.prompt,
        "new_tokens": args.new_tokens,
        "weight_gb_read_per_token": weight_bytes / 1e9,
        "hbm_floor_s": weight_bytes * args.new_tokens / bw if bw else None,
        "engines": {},
    }
    n = args.new_tokens

    def hf(**kw):
        return lambda: model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, **kw)

    runs, extra, tokens, all_logits = {}, {}, {}, {}
    if not args.skip_hf:
        runs["transformers default"] = timed(hf(), 2)
        hf(cache_implementation="static")()
        runs["transformers static cache + compile"] = timed(hf(cache_implementation="static"), args.runs)
    ref = None
    for variant in args.variants.split(","):
        torch._dynamo.reset()
        kwargs = dict(VARIANTS[variant][1])
        if variant in ("fp8-weight", "fp8-w8a8"):
            extra[f"{variant}_layers"] = fp8_weights(model, None if variant == "fp8-weight" else Fp8W8A8Linear)
            torch.cuda.empty_cache()
        if variant == "int4":
            kwargs["int4_group"] = args.int4_group
            extra["int4_kernel_rel_error"] = int4_kernel_error(args.int4_group)
        if variant == "int4-gemv":
            kwargs["int4_group"] = args.int4_group
            extra["gemv4_kernel_rel_error"] = gemv4_kernel_error(args.int4_group)
        if kwargs.get("gemv"):
            kwargs["tuned_dir"] = args.tuned_dir or False
        t0 = time.perf_counter()
        engine = Engine(model, max_len=args.prompt + n + 8, **kwargs)
        extra[f"build_s_{variant}"] = time.perf_counter() - t0  # the kernel engine tunes here
        if kwargs.get("gemv"):  # those not found among the saved configurations
            extra[f"tuned_keys_{variant}"] = len(engine.tuned_keys)
        t0 = time.perf_counter()
        engine.generate_timed(ids[0].tolist(), n)
        engine.generate_timed(ids[0].tolist(), n)
        extra[f"warmup_s_{variant}"] = time.perf_counter() - t0
        timings = [engine.generate_timed(ids[0].tolist(), n) for _ in range(args.runs)]
        runs[f"Engine {variant}"] = [t["total_s"] for t in timings]
        # As each variant ends: a run stopped at a time limit still says what it measured.
        print(variant, f"warm-up {extra[f'warmup_s_{variant}']:.0f} s", "runs", runs[f"Engine {variant}"], flush=True)
        tokens[variant] = timings[-1]["tokens"]
        captured = engine.captured()
        if captured["step"]:  # the hand-captured step replays what the eager one runs, its captured prefill
            extra[f"ttft_s_runs_{variant}"] = [t["ttft_s"] for t in timings]  # what the same prefill runs
            extra[f"prefill_captured_{variant}"] = captured["prefill"]  # eagerly, its greedy kernel what
            engine.run_eagerly()  # torch's argmax chooses
            eager = engine.generate_timed(ids[0].tolist(), 64)["tokens"]
            extra[f"graph_tokens_equal_eager_{variant}"] = eager == tokens[variant][:64]
        if getattr(engine, "gemv_configs", None):
            extra[f"gemv_configs_{variant}"] = {str(k): v for k, v in engine.gemv_configs.items()}
        if getattr(engine, "refine_log", None):  # the step's time as tuned, then each runner-up's
            extra[f"refine_log_{variant}"] = engine.refine_log
        extra[f"ttft_s_{variant}"] = statistics.median(t["ttft_s"] for t in timings)
        with torch.no_grad():
            logits = (
                engine.decoder(ids, torch.arange(ids.shape[1], device=ids.device))
                if engine.decoder is not None
                else model(ids, use_cache=False).logits
            )[0].float()
        all_logits[variant] = logits
        if kwargs.get("gemv"):  # the one-token step (its kernels, attention's chunks) against the prompt path
            extra.update(step_vs_prompt(engine.decoder, ids, logits, variant))
        if variant == "int4-gemv" and "int4" in all_logits:  # the same 4-bit weights on two kernels
            extra["kl_int4_gemv_vs_int4"], extra["prompt_argmax_agreement_int4_gemv_vs_int4"] = agreement(
                logits, all_logits["int4"]
            )
            extra["decoded_tokens_equal_int4_gemv_vs_int4"] = sum(
                a == b for a, b in zip(tokens["int4"], tokens[variant])
            )
        if ref is None:
            ref = logits
        else:
            extra[f"kl_vs_first_variant_{variant}"], extra[f"argmax_agreement_vs_first_variant_{variant}"] = agreement(
                logits, ref
            )
        read = engine.decoder if engine.decoder is not None else model
        extra[f"weight_gb_read_per_token_{variant}"] = (
            sum(
                p.numel() * p.element_size()
                for n_, p in [*read.named_parameters(), *read.named_buffers()]
                if "embed" not in n_ and "cache" not in n_
            )
            / 1e9
        )
        del engine
        torch.cuda.empty_cache()
    for name, ts in runs.items():
        med = statistics.median(ts)
        result["engines"][name] = {
            "runs_s": ts,
            "median_s": med,
            "tokens_per_s": n / med,
            "fraction_of_bf16_floor": (result["hbm_floor_s"] / med) if bw else None,
        }
    result.update(extra)
    result["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
