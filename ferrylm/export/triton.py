"""Write a Triton model repository for the Python backend in decoupled (streaming) mode."""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib import resources
from pathlib import Path


def _write_repo(triton_dir: str | Path, name: str, files: dict[str, str]) -> Path:
    """`triton_dir/name/` holding `files` (relative path → text), replaced in one rename."""
    target = Path(triton_dir) / name
    tmp = Path(triton_dir) / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "1").mkdir(parents=True)
    for rel, text in files.items():
        (tmp / rel).write_text(text)
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target


ENGINES = ("fused", "transformers", "onnx")


def write_triton_repo(
    triton_dir: str | Path,
    name: str,
    model_dir: str | Path,
    engine: str = "transformers",
    max_len: int = 2048,
    w4a16: bool = False,
) -> Path:
    """`triton_dir/name/config.pbtxt` + `1/model.py`, serving the model at `model_dir` with `engine`:
    "fused" (ferrylm's batch-1 engine on a merged Llama-family directory, or with `w4a16` on the
    export's W4A16 artifact; prompt + new tokens up to `max_len`), "transformers" (`generate()` on
    any merged directory) or "onnx" (an ONNX artifact directory)."""
    if engine not in ENGINES:
        raise ValueError(f"Triton engine {engine!r}: one of {', '.join(ENGINES)}")
    if w4a16 and engine != "fused":
        raise ValueError("a W4A16 artifact is served by the fused engine only")
    templates = resources.files("ferrylm") / "templates"
    config = (templates / "triton_config.pbtxt").read_text()
    # The exporting environment as the stub must see it: PYTHONPATH's entries first (a machine with packages
    # carried beside its own, e.g. --target dirs), then the interpreter's site-packages.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    site_packages = ":".join(
        dict.fromkeys(extra + [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))])
    )
    values = {
        "name": name,
        "model_dir": str(Path(model_dir).resolve()),
        "site_packages": site_packages,
        "engine": engine,
        "max_len": str(max_len),
        "w4a16": "1" if w4a16 else "",
    }
    for key, value in values.items():
        config = config.replace("{{" + key + "}}", value)
    files = {
        "config.pbtxt": config,
        "1/model.py": (templates / "triton_model.py").read_text(),
        "1/text_pieces.py": (templates / "text_pieces.py").read_text(),
    }
    if engine == "onnx":
        files["1/ferrylm_onnx.py"] = (resources.files("ferrylm") / "export" / "onnx.py").read_text()
    return _write_repo(triton_dir, name, files)


def write_vllm_backend_repo(
    triton_dir: str | Path, name: str, model_dir: str | Path, max_model_len: int = 4096
) -> Path:
    """`triton_dir/name/` for NVIDIA's Triton container with the vLLM backend (`backend: "vllm"`,
    engine arguments in `1/model.json`): the same merged model, batched by vLLM inside Triton. The
    tritonserver bundled in nvidia-pytriton has no vLLM backend, so this one is written, not served,
    here."""
    config = (
        f"# Written by `ferrylm export`. For Triton images that ship the vLLM backend.\n"
        f'name: "{name}"\nbackend: "vllm"\ninstance_group [ {{ count: 1 kind: KIND_MODEL }} ]\n'
    )
    engine_args = {
        "model": str(Path(model_dir).resolve()),
        "disable_log_requests": True,
        "gpu_memory_utilization": 0.9,
        "max_model_len": max_model_len,
        "enforce_eager": False,
    }
    return _write_repo(
        triton_dir, name, {"config.pbtxt": config, "1/model.json": json.dumps(engine_args, indent=2) + "\n"}
    )
