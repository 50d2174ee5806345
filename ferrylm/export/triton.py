"""Write a Triton model repository for the Python backend in decoupled (streaming) mode."""
from __future__ import annotations

import shutil
import sys
from importlib import resources
from pathlib import Path


def write_triton_repo(triton_dir: str | Path, name: str, model_dir: str | Path, engine: str = "transformers") -> Path:
    """`triton_dir/name/config.pbtxt` + `1/model.py`, serving the model at `model_dir` with
    `engine` "transformers" (a merged Hugging Face directory) or "onnx" (an ONNX artifact directory)."""
    templates = resources.files("ferrylm") / "templates"
    target = Path(triton_dir) / name
    tmp = Path(triton_dir) / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "1").mkdir(parents=True)
    config = (templates / "triton_config.pbtxt").read_text()
    site_packages = ":".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    config = (config.replace("{{name}}", name).replace("{{model_dir}}", str(Path(model_dir).resolve()))
              .replace("{{site_packages}}", site_packages).replace("{{engine}}", engine))
    (tmp / "config.pbtxt").write_text(config)
    (tmp / "1" / "model.py").write_text((templates / "triton_model.py").read_text())
    if engine == "onnx":
        (tmp / "1" / "ferrylm_onnx.py").write_text((resources.files("ferrylm") / "export" / "onnx.py").read_text())
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target
