"""Triton Inference Server (the binary bundled in the `nvidia-pytriton` wheel) serving a model
repository written by `ferrylm export`.

The wheel ships the server, its Python backend and one Python-backend stub per Python version.
The stub must match the interpreter whose libpython it loads and whose site-packages the model
reads, so the server tree is laid out once per interpreter under the cache: the stub for this
Python placed in backends/python, and LD_LIBRARY_PATH pointing at this interpreter's libpython.
The stub is also built against numpy 1: with numpy 2 it reads a request's string input as garbage
and dies. Its embedded interpreter takes its prefix from the first python on PATH, so the server
runs with <venv>/triton-python/bin (a small environment holding numpy 1.26, made by `make install`)
first on PATH; the model then adds the exporting environment's packages (torch, transformers).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from .process import ManagedServer, ServeError, port_in_use


def _pytriton_dir() -> Path:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise ServeError(
            "serve.backend: triton needs the tritonserver bundled in nvidia-pytriton "
            "(pip install --no-deps nvidia-pytriton==0.7.0; `make install` does it)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def server_tree(cache_dir: str | Path) -> Path:
    """The bundled server laid out for this interpreter (made once, in one rename)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    target = Path(cache_dir) / f"tritonserver-py{version}"
    if (target / "backends" / "python" / "triton_python_backend_stub").is_file():
        return target
    source = _pytriton_dir() / "tritonserver"
    stub = source / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.is_file():
        raise ServeError(f"serve.backend: nvidia-pytriton has no Python-backend stub for Python {version}")
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, ignore=shutil.ignore_patterns("python_backend_stubs"), symlinks=True)
    shutil.copy2(stub, tmp / "backends" / "python" / "triton_python_backend_stub")
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target


def stub_python() -> Path:
    """The bin/ of a small virtual environment with numpy 1 (`make install` makes it): the stub's
    embedded interpreter takes its prefix, and so its numpy, from the first python on PATH."""
    bin_dir = Path(sys.prefix) / "triton-python" / "bin"
    probe = (
        subprocess.run(
            [str(bin_dir / "python3"), "-c", "import numpy; print(numpy.__version__)"], capture_output=True, text=True
        )
        if (bin_dir / "python3").exists()
        else None
    )
    if probe is None or probe.returncode != 0 or not probe.stdout.startswith("1."):
        raise ServeError(
            f"serve.backend: Triton's Python stub needs an environment with numpy<2 at {bin_dir.parent} "
            f"({sys.executable} -m venv {bin_dir.parent} && {bin_dir}/pip install numpy==1.26.4; "
            f"`make install` does it)"
        )
    return bin_dir


class TritonServer(ManagedServer):
    """HTTP on `port`, gRPC on port+1, metrics on port+2; only `model_name` is loaded."""

    kind = "Triton"

    def __init__(
        self,
        repository: str | Path,
        model_name: str,
        host: str,
        port: int,
        log_file: str | Path,
        startup_timeout_s: float,
        drain_timeout_s: int,
        cache_dir: str | Path,
        max_queue: int = 16,
        tune_budget_s: float | None = None,
    ):
        super().__init__(host, port, log_file, startup_timeout_s, drain_timeout_s)
        self.max_queue, self.tune_budget_s = max_queue, tune_budget_s
        self.repository = Path(repository)
        self.served_name = model_name
        self.cache_dir = Path(cache_dir)
        self.health_path = f"/v2/models/{model_name}/ready"
        self.tree: Path | None = None

    @property
    def model_dir(self) -> Path:
        return self.repository / self.served_name

    def check(self) -> None:
        if not (self.model_dir / "config.pbtxt").is_file():
            raise ServeError(
                f"serve.triton_model: {self.model_dir} is not a Triton model (no config.pbtxt); "
                f"run `ferrylm export` first"
            )
        for port in (self.port, self.port + 1, self.port + 2):
            if port_in_use(self.host, port):
                raise ServeError(
                    f"serve.port: {self.host}:{port} is already in use (Triton takes serve.port "
                    f"and the two after it); pick another with serve.port=N"
                )
        self.tree = server_tree(self.cache_dir)
        self.stub_bin = stub_python()

    def command(self) -> list[str]:
        return [
            str(self.tree / "bin" / "tritonserver"),
            "--model-repository",
            str(self.repository),
            "--backend-directory",
            str(self.tree / "backends"),
            "--model-control-mode",
            "explicit",
            "--load-model",
            self.served_name,
            "--http-address",
            self.host,
            "--http-port",
            str(self.port),
            "--grpc-address",
            self.host,
            "--grpc-port",
            str(self.port + 1),
            "--metrics-address",
            self.host,
            "--metrics-port",
            str(self.port + 2),
            "--exit-timeout-secs",
            str(self.drain_timeout_s),
            "--log-verbose",
            "0",
        ]

    def env(self) -> dict:
        env = super().env()
        libs = [
            sysconfig.get_config_var("LIBDIR"),  # this interpreter's libpython
            str(_pytriton_dir().parent / "nvidia_pytriton.libs"),
            str(self.tree / "lib"),
        ]
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [*libs, env.get("LD_LIBRARY_PATH", "")]))
        # The stub is built against numpy 1: under numpy 2 it hands the model mangled string inputs.
        # Its interpreter finds its prefix (and numpy) through the first python on PATH.
        env["PATH"] = f"{self.stub_bin}:{env.get('PATH', '')}"
        env["FERRYLM_MAX_QUEUE"] = str(self.max_queue)  # the model's queue bound (templates/triton_model.py)
        if self.tune_budget_s is not None:
            env["FERRYLM_TUNE_BUDGET_S"] = str(self.tune_budget_s)
        return env
