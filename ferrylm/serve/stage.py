"""`run_serve(cfg)`: the serve stage's entry function and its helpers (what the stage does: the
package's docstring)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ..config import Config
from ..manifest import StageRecord, read_record
from .process import ManagedServer, ServeError, free_port, port_in_use
from .triton_server import TritonServer
from .vllm_server import Parallel, VllmServer

LOOPBACK = {"127.0.0.1", "localhost", "::1"}  # the addresses only this machine reaches

__all__ = [
    "ServeError",
    "VllmServer",
    "TritonServer",
    "free_port",
    "port_in_use",
    "server_for",
    "run_serve",
    "served_model_dir",
]


def served_model_dir(cfg: Config) -> Path:
    if cfg.serve.model:
        return Path(cfg.serve.model)
    return artifact_dir(cfg, cfg.serve.artifact, "serve.artifact")


def artifact_dir(cfg: Config, artifact: str, key: str) -> Path:
    """The export's `artifact` ("merged", or a kind of export.vllm_quantize); `key` names the setting that
    asked for it in the one-line error."""
    try:
        outputs = read_record(cfg.stage_dir("export"))["outputs"]
    except FileNotFoundError:
        raise ServeError(
            f"serve.model is unset and {cfg.stage_dir('export')} holds no export: "
            "run `ferrylm export` first or set serve.model=DIR"
        ) from None
    name = "merged" if artifact == "merged" else f"vllm_{artifact}"
    if name not in outputs:
        raise ServeError(
            f"{key}={artifact}: this run's export wrote no such artifact; export with export.vllm_quantize=[{artifact}]"
        )
    return Path(outputs[name])


def api_key(cfg: Config) -> str | None:
    """The key clients must send, from the variable serve.api_key_env names; a non-loopback host without one is
    refused (the endpoint would answer anyone on the network)."""
    key = os.environ.get(cfg.serve.api_key_env) or None
    if key is None and cfg.serve.host not in LOOPBACK:
        raise ServeError(
            f"serve.host={cfg.serve.host} opens the endpoint beyond this machine: put the key clients "
            f"must send in ${cfg.serve.api_key_env} (serve.api_key_env), or keep serve.host=127.0.0.1"
        )
    return key


def server_for(
    cfg: Config,
    model_dir: str | Path,
    served_name: str | None = None,
    port: int | None = None,
    lora_dir: str | Path | None = None,
) -> VllmServer:
    s = cfg.serve
    parallel = Parallel(s.tensor_parallel, s.data_parallel, s.gpu_memory_utilization, tuple(s.vllm_args))
    return VllmServer(
        model_dir,
        served_name or s.served_name,
        s.host,
        port or s.port,
        s.dtype,
        s.max_model_len,
        s.kv_cache_gib,
        cfg.stage_dir("serve") / "vllm.log",
        s.startup_timeout_s,
        s.drain_timeout_s,
        lora_dir,
        parallel,
        api_key(cfg),
    )


def lora_server_for(cfg: Config, port: int | None = None) -> VllmServer:
    """The base model with the run's adapter applied by vLLM (serve.lora=true)."""
    from ..models import resolve_model_path

    try:
        trained = read_record(cfg.stage_dir("train"))
    except FileNotFoundError:
        raise ServeError(
            f"serve.lora: {cfg.stage_dir('train')} holds no training run: run `ferrylm train` first"
        ) from None
    outputs, method = trained["outputs"], trained["metrics"]["method"]
    if method == "full":
        raise ServeError("serve.lora: this run is a full fine-tune (no adapter); serve its export instead")
    return server_for(
        cfg, resolve_model_path(cfg.model.path, cfg.model.cache_dir), port=port, lora_dir=outputs["adapter"]
    )


def triton_server_for(cfg: Config, port: int | None = None, repo: Path | None = None) -> TritonServer:
    """The export's Triton model (serve.triton_model picks another of its repository), or `repo`
    (<repository>/<name>, e.g. the eval stage's repository for the base model)."""
    from ..models import cache_root

    s = cfg.serve
    if s.host not in LOOPBACK and not s.behind_proxy:
        raise ServeError(
            f"serve.host={s.host}: Triton has no authentication of its own and would answer anyone on the "
            "network; keep serve.host=127.0.0.1, set serve.behind_proxy=true if your proxy authenticates "
            "in front of it, or serve with serve.backend=vllm and a key (serve.api_key_env)"
        )
    if repo is None:
        try:
            repo = Path(read_record(cfg.stage_dir("export"))["outputs"]["triton_model"])  # <triton_dir>/<name>
        except FileNotFoundError:
            raise ServeError(
                f"serve.backend=triton: {cfg.stage_dir('export')} holds no export: run `ferrylm export` first"
            ) from None
        repo = repo.parent / (s.triton_model or repo.name)
    return TritonServer(
        repo.parent,
        repo.name,
        s.host,
        port or s.port,
        cfg.stage_dir("serve") / "triton.log",
        s.startup_timeout_s,
        s.drain_timeout_s,
        cache_root(cfg.model.cache_dir),
        s.max_queue,
        s.tune_budget_s,
    )


def run_serve(cfg: Config, block: bool = True) -> StageRecord:
    """Start the endpoint, print its URL, and (block=True) serve until SIGTERM or Ctrl-C."""
    triton = cfg.serve.backend == "triton"
    if triton:
        server: ManagedServer = triton_server_for(cfg)
    else:
        server = lora_server_for(cfg) if cfg.serve.lora else server_for(cfg, served_model_dir(cfg))
    if not block:
        return _started(cfg, server)
    # Installed before the start: a signal while the server warms up stops it the same way. Put back
    # after: a caller's process (and whatever it forks later) must not keep the serve stage's handlers.
    previous = {sig: signal.signal(sig, _stop_requested) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        record = _started(cfg, server)
        code = server.wait()
    except _StopRequested:
        server.stop()
        raise SystemExit(0) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code:
        raise ServeError(f"{server.kind} exited with code {code}; see {server.log_file}")
    return record


def _started(cfg: Config, server: ManagedServer) -> StageRecord:
    server.start()
    record = StageRecord("serve", cfg.digest())
    record.outputs = {"url": server.url, "log": str(server.log_file), "model": str(server.model_dir)}
    record.metrics = {"served_model_name": server.served_name, "backend": cfg.serve.backend}
    record.finish(cfg.stage_dir("serve"))
    where = (
        f"{server.url}/v2/models/{server.served_name}/generate_stream (gRPC on port {server.port + 1})"
        if isinstance(server, TritonServer)
        else f"{server.url}/v1"
    )
    print(
        f"ferrylm: serving {server.model_dir} as '{server.served_name}' at {where} "
        f"(health: {server.url}{server.health_path}). Ctrl-C stops it.",
        flush=True,
    )
    return record


def _stop_requested(signum, frame):
    # Only unwinds: stopping from inside the handler would run in the middle of Popen.wait, whose
    # lock makes every poll() say "running" (the server's exit went unseen until the whole drain
    # grace was over). One stop: a second signal (systemd's SIGTERM to the whole group, a second
    # Ctrl-C) does not start another.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise _StopRequested


class _StopRequested(Exception):
    pass
