"""One config system: a YAML file (or a preset shipped in the package), dotted overrides, pydantic.

Every stage takes the whole validated `Config` and reads its own section, so a run is described by
one file. A typo or a bad value raises `ConfigError` with one line that names the key.
"""

from __future__ import annotations

from .base import ConfigError
from .bench import BenchConfig
from .data import DEFAULT_EXTENSIONS, SEED_EXTENSIONS, DataConfig
from .eval import EvalConfig
from .export import ExportConfig
from .hardware import HardwareConfig
from .loader import Config, derive, load_config, preset_names
from .model import ModelConfig
from .review import ReviewConfig
from .serve import ServeConfig
from .train import TrainConfig

__all__ = [
    "BenchConfig",
    "Config",
    "ConfigError",
    "DataConfig",
    "DEFAULT_EXTENSIONS",
    "EvalConfig",
    "ExportConfig",
    "HardwareConfig",
    "ModelConfig",
    "ReviewConfig",
    "SEED_EXTENSIONS",
    "ServeConfig",
    "TrainConfig",
    "derive",
    "load_config",
    "preset_names",
]
