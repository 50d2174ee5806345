"""`serve`: vLLM or tritonserver on the export's artifacts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import _Section


class ServeConfig(_Section):
    backend: Literal["vllm", "triton"] = "vllm"
    """"vllm": the merged model behind vLLM's OpenAI API. "triton": a Triton repository written by the export
    stage (its record names it), streamed over Triton's HTTP generate / gRPC endpoints."""
    model: str | None = None
    """None serves the exported model of this run: `artifact` picks which one (the merged model, or a vLLM-
    format quantized artifact written with export.vllm_quantize)."""
    artifact: Literal["merged", "w4a16", "fp8"] = "merged"
    """Which of the export's artifacts vLLM serves: the merged model or a quantized one from export.vllm_quantize."""
    triton_model: str | None = None
    """backend=triton: which repository model (None: the export's merged model; "<name>-onnx" is the ONNX one)."""
    lora: bool = False
    """backend=vllm: serve the base model with the run's LoRA adapter applied by vLLM (--enable-lora) instead
    of the merged model; the adapter answers as served_name, the base as "<served_name>-base"."""
    served_name: str = "ferrylm"
    """The model name clients ask for (OpenAI API `model`)."""
    host: str = "127.0.0.1"
    """Address to bind; loopback unless you open it. Any other address needs a key (api_key_env) on vLLM, and on
    Triton, which has no authentication, behind_proxy=true."""
    api_key_env: str = "FERRYLM_API_KEY"
    """The environment variable holding the key clients must send (`Authorization: Bearer KEY`): vLLM is given it,
    `ferrylm chat`/`complete` and the eval send it. Never put the key itself in a config: none is written to a log
    or a record. Unset on loopback: no key asked."""
    behind_proxy: bool = False
    """backend=triton on a non-loopback host: true only where your own proxy authenticates every request in front of
    Triton (it has no authentication of its own); otherwise such a host is refused."""
    port: int = Field(8000, gt=0, lt=65536)
    """HTTP port (Triton: gRPC on the next one, metrics on the one after)."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """auto: bfloat16 on GPUs and on CPUs with native bf16 (AVX512-BF16, AMX), else float32: emulated bf16 made
    vLLM's CPU build ~10x slower on an AVX2 machine (docs/performance.md)."""
    max_model_len: int = Field(2048, gt=0)
    """Longest prompt + reply vLLM accepts (tokens)."""
    startup_timeout_s: float = Field(900, gt=0)
    """Seconds to wait for /health before giving up (vLLM's first start compiles)."""
    kv_cache_gib: int = Field(1, gt=0)
    """vLLM's CPU build only: RAM for the KV cache. On GPUs the cache takes what gpu_memory_utilization leaves
    after the weights."""
    tensor_parallel: int = Field(1, gt=0)
    """vLLM's CUDA build: GPUs per replica (must divide the attention heads; the KV heads divided by it or dividing it)."""
    data_parallel: int = Field(1, gt=0)
    """vLLM's CUDA build: replicas of the model, each on tensor_parallel GPUs."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """vLLM's CUDA build: share of each GPU's memory vLLM takes (weights + KV cache)."""
    vllm_args: list[str] = Field(default_factory=list)
    """Any other vLLM flag, passed as given, e.g. ["--enable-prefix-caching", "--max-num-seqs", "64"]."""

    @field_validator("vllm_args", mode="before")
    @classmethod
    def _flags_as_text(cls, v):
        # YAML reads `--max-num-seqs, 64` as a string and an int; a command line is all text.
        return [str(a) for a in v] if isinstance(v, list) else v

    max_queue: int = Field(16, ge=0)
    """backend=triton: requests that may wait while one streams (the engine runs one at a time); one more is
    refused at once with a "busy ... retry later" error (code UNAVAILABLE; HTTP 400) and nothing is generated for it."""
    tune_budget_s: float | None = Field(60, gt=0)
    """backend=triton, fused engine on a GPU: seconds the engine may spend tuning its kernels at start-up. Shapes
    shipped for this GPU (engine/tuning/defaults/) or saved by an earlier start need none; past the budget a shape takes
    its first candidate untimed, tuned by the next start. None: no limit."""
    drain_timeout_s: int = Field(60, ge=0)
    """On SIGTERM, requests in flight get this long to finish (vLLM's drain) before the server exits."""
