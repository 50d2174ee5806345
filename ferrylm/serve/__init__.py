"""Serve stage: the exported model behind vLLM's OpenAI-compatible API, or its Triton repository
behind Triton, until SIGTERM / Ctrl-C."""

from .stage import (
    ServeError,
    TritonServer,
    VllmServer,
    artifact_dir,
    free_port,
    lora_server_for,
    port_in_use,
    run_serve,
    served_model_dir,
    server_for,
    triton_server_for,
)

__all__ = [
    "ServeError",
    "TritonServer",
    "VllmServer",
    "free_port",
    "lora_server_for",
    "port_in_use",
    "run_serve",
    "artifact_dir",
    "served_model_dir",
    "server_for",
    "triton_server_for",
]
