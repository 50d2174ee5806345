"""Serve stage: the exported model behind vLLM's OpenAI-compatible API until SIGTERM / Ctrl-C."""
from __future__ import annotations

import signal
from pathlib import Path

from ..config import Config
from ..manifest import StageRecord, read_record
from .vllm_server import ServeError, VllmServer, port_in_use

__all__ = ["ServeError", "VllmServer", "port_in_use", "server_for", "run_serve", "served_model_dir"]


def served_model_dir(cfg: Config) -> Path:
    if cfg.serve.model:
        return Path(cfg.serve.model)
    try:
        return Path(read_record(cfg.stage_dir("export"))["outputs"]["merged"])
    except FileNotFoundError:
        raise ServeError(f"serve.model is unset and {cfg.stage_dir('export')} holds no export: "
                         "run `ferrylm export` first or set serve.model=DIR") from None


def server_for(cfg: Config, model_dir: str | Path, served_name: str | None = None, port: int | None = None) -> VllmServer:
    s = cfg.serve
    return VllmServer(model_dir, served_name or s.served_name, s.host, port or s.port, s.dtype,
                      s.max_model_len, s.kv_cache_gib, cfg.stage_dir("serve") / "vllm.log", s.startup_timeout_s,
                      s.drain_timeout_s)


def run_serve(cfg: Config, block: bool = True) -> StageRecord:
    """Start the endpoint, print its URL, and (block=True) serve until SIGTERM or Ctrl-C."""
    out = cfg.stage_dir("serve")
    record = StageRecord("serve", cfg.digest())
    server = server_for(cfg, served_model_dir(cfg)).start()
    record.outputs = {"url": server.url, "log": str(server.log_file), "model": str(server.model_dir)}
    record.metrics = {"served_model_name": server.served_name}
    record.finish(out)
    print(f"ferrylm: serving {server.model_dir} as '{server.served_name}' at {server.url}/v1 "
          f"(health: {server.url}/health). Ctrl-C stops it.", flush=True)
    if not block:
        return record

    def _stop(signum, frame):
        server.stop()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    code = server.wait()
    if code:
        raise ServeError(f"vLLM exited with code {code}; see {server.log_file}")
    return record
