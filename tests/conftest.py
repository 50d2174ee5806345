"""Shared fixtures: the real SmolLM2 (converted once into the repo's cache) and a tiny random Qwen2."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ferrylm.config import load_config
from ferrylm.models import convert_embedded, make_tiny_qwen2
from tests.pinning import learning_rate

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "ferrylm"


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    return convert_embedded(CACHE)


@pytest.fixture(scope="session")
def tiny_qwen2_dir(smollm2_dir) -> Path:
    return make_tiny_qwen2(CACHE / "tiny-qwen2", smollm2_dir)


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """A small real corpus: a slice of the standard library copied into a temp dir."""
    import sysconfig

    src = Path(sysconfig.get_paths()["stdlib"])
    dst = tmp_path_factory.mktemp("corpus")
    for name in ("json", "email", "textwrap.py", "shlex.py", "fractions.py", "statistics.py", "heapq.py", "bisect.py"):
        p = src / name
        if p.is_dir():
            shutil.copytree(p, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(p, dst / name)
    return dst


@pytest.fixture(scope="session")
def tiny_data_run(tmp_path_factory, tiny_qwen2_dir, tiny_corpus):
    """A run directory whose data stage is done (tiny Qwen2, stdlib slice); copy it before writing."""
    from ferrylm.data import run_data

    run_dir = tmp_path_factory.mktemp("tiny-run")
    cfg = tiny_config(run_dir, tiny_qwen2_dir, tiny_corpus)
    run_data(cfg)
    return run_dir


def tiny_overrides(run_dir, model_dir, corpus) -> list[str]:
    """The default preset made small: the tiny Qwen2 on a stdlib slice, a few steps."""
    return [
        f"run_dir={run_dir}",
        f"model.path={model_dir}",
        f"data.sources=[{corpus}]",
        "data.max_pairs=200",
        "data.eval_fraction=0.3",
        "data.max_seq_len=256",
        "train.max_steps=8",
        "train.per_device_batch_size=2",
        "train.logging_steps=1",
        "train.save_steps=4",
        learning_rate(),
        "train.lora_dropout=0",
        "train.warmup_steps=0",
        "train.eval_batches=4",
        f"export.triton_dir={run_dir}/triton_models",
    ]


def tiny_config(run_dir, model_dir, corpus, *overrides):
    return load_config("default", [*tiny_overrides(run_dir, model_dir, corpus), *overrides])


@pytest.fixture
def copy_run(tiny_data_run, tmp_path):
    """A private copy of the prepared run directory."""

    def _copy(name: str = "run") -> Path:
        dst = tmp_path / name
        shutil.copytree(tiny_data_run, dst)
        return dst

    return _copy


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def make_config():
    """tiny_config(run_dir, model_dir, corpus, *overrides) as a fixture, for tests in subfolders."""
    return tiny_config
