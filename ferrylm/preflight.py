"""Cheap checks of a stage's inputs, made by the CLI before the stage's heavy imports (torch,
transformers, vLLM): a wrong path or a missing upstream stage is one line within a second, not
after ten seconds of imports. The stages make the same checks again where they read."""

from __future__ import annotations

from pathlib import Path

from .config import Config
from .config.data import BUILT_IN_SOURCES
from .errors import FerryError
from .manifest import read_record
from .models import check_model_path


class MissingInput(FerryError):
    pass


def _model(cfg: Config) -> None:
    check_model_path(cfg.model.path)


def _sources(cfg: Config) -> None:
    d = cfg.data
    for source in d.sources if d.format != "jsonl" else []:
        if source not in BUILT_IN_SOURCES and not Path(source).expanduser().is_dir():
            raise MissingInput(f"data.sources: {source} is not a directory")
    if d.manifest and d.format != "jsonl" and not Path(d.manifest).is_file():
        raise MissingInput(f"data.manifest: {d.manifest} does not exist")
    for f in d.jsonl_files if d.format == "jsonl" else []:
        if not Path(f).is_file():
            raise MissingInput(f"data.jsonl_files: {f} does not exist")


# What an export option needs installed: (module, pip name with the version the install profiles pin).
# The doctor reports the same table.
EXPORT_PACKAGES = {
    "vllm_quantize": ("compressed_tensors", "compressed-tensors==0.17.0"),
    "onnx": ("onnxruntime", "onnxruntime"),
}


def _export_packages(cfg: Config) -> None:
    import importlib.util

    for key, (module, pip_name) in EXPORT_PACKAGES.items():
        if getattr(cfg.export, key) and importlib.util.find_spec(module) is None:
            raise MissingInput(
                f"export.{key}: needs {pip_name.split('==')[0]}, which is not installed "
                f"(pip install {pip_name}; `make install` does it)"
            )


def check_inputs(stage: str, cfg: Config) -> None:
    """Raise a FerryError naming the key or the stage to run first; silent when all is there."""
    if stage in ("data", "run", "train", "export"):
        _model(cfg)
    if stage in ("data", "run"):
        _sources(cfg)
    if stage in ("export", "run"):
        _export_packages(cfg)
    needs = {"train": ("data",), "export": ("data", "train"), "eval": ("data",)}.get(stage, ())
    if stage == "serve" and not cfg.serve.model and cfg.serve.backend == "vllm":
        needs = ("train",) if cfg.serve.lora else ("export",)
    for upstream in needs:
        read_record(cfg.stage_dir(upstream))
