"""vLLM's OpenAI-compatible server (the CPU build here, the CUDA build on GPU hosts)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .process import ManagedServer, ServeError


def _cpu_build() -> bool:
    try:
        importlib.metadata.distribution("vllm-cpu")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def _cpu_flag(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and flag in line.split() for line in fh)
    except OSError:
        return True  # not Linux: let vLLM decide


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def resolved_dtype(dtype: str, cpu_build: bool) -> str:
    """serve.dtype=auto: bfloat16 unless this is vLLM's CPU build on a CPU without native bf16."""
    if dtype != "auto":
        return dtype
    native = any(_cpu_flag(f) for f in ("avx512_bf16", "amx_bf16"))
    return "float32" if cpu_build and not native else "bfloat16"


def gpus_present() -> int:
    """CUDA devices this process may use (CUDA_VISIBLE_DEVICES applies); 0 without a CUDA torch."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _group_size(quant: dict) -> int:
    """The weights' group size in a compressed-tensors quantization_config (-1: one scale per output channel)."""
    weights = next(iter(quant.get("config_groups", {}).values()), {}).get("weights") or {}
    return weights.get("group_size") or -1


def marlin_refusal(config: dict, group: int, tensor: int = 1) -> str | None:
    """Why vLLM's 4-bit GPU kernels cannot run this model's linear layers, or None. Marlin runs on every GPU
    vLLM supports (Machete, Hopper's, takes fewer group sizes); its rules, from vLLM's marlin_utils: a group
    size of 32, 64, 128 or per channel, each layer's inputs per GPU a multiple of 128 and of the group size,
    its outputs per GPU a multiple of 64. vLLM merges q/k/v and gate/up into one layer each."""
    if group not in (-1, 32, 64, 128):
        return f"group size {group} (Marlin takes 32, 64, 128 or one scale per channel: export.w4a16_group_size)"
    try:
        hidden, heads, inter = config["hidden_size"], config["num_attention_heads"], config["intermediate_size"]
    except KeyError:
        return None  # not a decoder ferrylm knows the layers of: vLLM decides
    head_dim = config.get("head_dim") or hidden // heads
    kv = config.get("num_key_value_heads", heads)
    layers = {
        "q/k/v": (hidden, (heads // tensor + 2 * max(kv // tensor, 1)) * head_dim),
        "o_proj": (heads * head_dim // tensor, hidden),
        "gate/up": (hidden, 2 * inter // tensor),
        "down_proj": (inter // tensor, hidden),
    }
    per_gpu = f" per GPU at serve.tensor_parallel={tensor}" if tensor > 1 else ""
    for name, (inputs, outputs) in layers.items():
        if inputs % 128 or (group > 0 and inputs % group):
            return f"{name} takes {inputs} inputs{per_gpu}, not a multiple of 128 (Marlin's tile) and of the group size"
        if outputs % 64:
            return f"{name} gives {outputs} outputs{per_gpu}, not a multiple of 64 (Marlin's tile)"
    return None


# Flags ferrylm sets from the serve config; serve.vllm_args may not set them a second time.
_OWN_FLAGS = (
    "--model",
    "--host",
    "--port",
    "--dtype",
    "--max-model-len",
    "--shutdown-timeout",
    "--served-model-name",
    "--enable-lora",
    "--lora-modules",
    "--max-lora-rank",
    "--tensor-parallel-size",
    "-tp",
    "--data-parallel-size",
    "-dp",
    "--gpu-memory-utilization",
)


@dataclass(frozen=True)
class Parallel:
    """How vLLM spreads a model over GPUs (serve.tensor_parallel, data_parallel, gpu_memory_utilization)."""

    tensor: int = 1
    data: int = 1
    gpu_memory_utilization: float = 0.9
    extra_args: tuple[str, ...] = ()

    def check(self, model_config: dict, cpu_build: bool, gpus: int) -> None:
        flags = {a.split("=", 1)[0] for a in self.extra_args}
        if taken := sorted(flags & set(_OWN_FLAGS)):
            raise ServeError(
                f"serve.vllm_args: {', '.join(taken)} is set from the serve config "
                "(serve.port, serve.tensor_parallel, ...); set it there"
            )
        if cpu_build:
            if self.tensor * self.data > 1:
                raise ServeError(
                    "serve.tensor_parallel / serve.data_parallel: vLLM's CPU build serves one process "
                    "here; set both to 1"
                )
            return
        heads = model_config.get("num_attention_heads", 1)
        kv = model_config.get("num_key_value_heads") or heads
        if heads % self.tensor or (kv % self.tensor and self.tensor % kv):
            raise ServeError(
                f"serve.tensor_parallel={self.tensor}: the model has {heads} attention heads and {kv} "
                f"KV heads; vLLM needs the heads divisible by it and the KV heads divisible by it "
                f"(or it by them); try {_fitting_tp(heads, kv, gpus)}"
            )
        if self.tensor * self.data > gpus:
            raise ServeError(
                f"serve.tensor_parallel × serve.data_parallel = {self.tensor * self.data} GPUs, "
                f"but {gpus} {'is' if gpus == 1 else 'are'} present"
            )

    def args(self, cpu_build: bool) -> list[str]:
        if cpu_build:
            return list(self.extra_args)
        out = [
            "--tensor-parallel-size",
            str(self.tensor),
            "--gpu-memory-utilization",
            f"{self.gpu_memory_utilization:g}",
        ]
        if self.data > 1:
            out += ["--data-parallel-size", str(self.data)]
        return out + list(self.extra_args)


def _fitting_tp(heads: int, kv: int, gpus: int) -> int:
    return max(t for t in range(1, max(gpus, 1) + 1) if heads % t == 0 and (kv % t == 0 or t % kv == 0))


class VllmServer(ManagedServer):
    kind = "vLLM"
    stopped_marker = "Application shutdown complete"  # uvicorn's last word, after the drain

    def __init__(
        self,
        model_dir: str | Path,
        served_name: str,
        host: str,
        port: int,
        dtype: str,
        max_model_len: int,
        kv_cache_gib: int,
        log_file: str | Path,
        startup_timeout_s: float,
        drain_timeout_s: int = 60,
        lora_dir: str | Path | None = None,
        parallel: Parallel = Parallel(),
        api_key: str | None = None,
    ):
        super().__init__(host, port, log_file, startup_timeout_s, drain_timeout_s)
        self.api_key = api_key
        self.model_dir = Path(model_dir)
        self.served_name = served_name
        self.lora_dir = Path(lora_dir) if lora_dir else None
        self.dtype, self.max_model_len, self.kv_cache_gib = dtype, max_model_len, kv_cache_gib
        self.parallel = parallel

    def command(self) -> list[str]:
        # `python -m` rather than the `vllm` console script, which the CPU build's metadata breaks.
        return [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--dtype",
            resolved_dtype(self.dtype, _cpu_build()),
            "--max-model-len",
            str(self.max_model_len),
            "--shutdown-timeout",
            str(self.drain_timeout_s),
            "--served-model-name",
            f"{self.served_name}-base" if self.lora_dir else self.served_name,
            *self._lora_args(),
            *self.parallel.args(_cpu_build()),
        ]

    def _lora_args(self) -> list[str]:
        if not self.lora_dir:
            return []
        rank = json.loads((self.lora_dir / "adapter_config.json").read_text())["r"]
        # vLLM takes a maximum rank from a fixed set; the smallest that holds the adapter's.
        max_rank = next((r for r in (8, 16, 32, 64, 128, 256, 320, 512) if r >= rank), rank)
        return [
            "--enable-lora",
            "--lora-modules",
            f"{self.served_name}={self.lora_dir}",
            "--max-lora-rank",
            str(max_rank),
        ]

    def env(self) -> dict:
        env = super().env()
        if self.api_key:  # vLLM's own check of `Authorization: Bearer`; in the environment, not on the command line
            env["VLLM_API_KEY"] = self.api_key
        if _cpu_build():
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.kv_cache_gib))
            # On CPUs with AMX the CPU build runs 4-bit weights with int8 activations (W4A8) unless told not
            # to: a W4A16 artifact served that way was 60-70 % as far from the artifact as its 4 bits are
            # from bf16 (docs/performance.md). Serve what the export wrote and gated; setting it in the
            # environment opts back in.
            env.setdefault("VLLM_CPU_INT4_W4A8", "0")
            # The CPU build keeps one core off its compute threads for its scheduler process: on two
            # cores, half the machine. Measured on two, decoding is faster with both computing
            # (docs/performance.md); larger machines keep vLLM's choice.
            if _usable_cpus() <= 2:
                env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        elif importlib.util.find_spec("flashinfer") is None:
            # vLLM's CUDA sampler imports flashinfer unless told not to; flashinfer (~370 MB of kernels) is optional.
            env.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
        return env

    def check(self) -> None:
        if not (self.model_dir / "config.json").is_file():
            raise ServeError(f"serve.model: {self.model_dir} is not a model directory (no config.json)")
        model_config = json.loads((self.model_dir / "config.json").read_text())
        quant, cpu = model_config.get("quantization_config") or {}, _cpu_build()
        if quant.get("format") == "pack-quantized" and cpu and not _cpu_flag("avx512f"):
            # vllm-cpu builds its 4-bit (WNA16) kernel only into its AVX-512 library.
            raise ServeError(
                f"serve.artifact: {self.model_dir} holds 4-bit weights, which vLLM's CPU build runs only "
                "on CPUs with AVX-512 (this one has none); serve the merged model, or on a GPU"
            )
        if self.lora_dir and not (self.lora_dir / "adapter_config.json").is_file():
            raise ServeError(f"serve.lora: {self.lora_dir} is not a LoRA adapter (no adapter_config.json)")
        self.parallel.check(model_config, cpu, 0 if cpu else gpus_present())
        if (
            quant.get("format") == "pack-quantized"
            and not cpu
            and (why := marlin_refusal(model_config, _group_size(quant), self.parallel.tensor))
        ):
            raise ServeError(
                f"serve.artifact: {self.model_dir} holds 4-bit weights that vLLM's GPU kernels cannot run: "
                f"{why}; serve the merged model, or this artifact through serve.backend=triton (ferrylm's engine)"
            )
        super().check()
