"""The whole config (every section) and how it is read: a preset or YAML file, dotted overrides, one line per error."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, model_validator

from .base import ConfigError, _Section
from .bench import BenchConfig
from .data import DataConfig
from .eval import EvalConfig
from .export import ExportConfig
from .hardware import HardwareConfig
from .model import ModelConfig
from .review import ReviewConfig
from .serve import ServeConfig
from .train import TrainConfig


class Config(_Section):
    run_dir: str = "runs/default"
    """Where every stage writes its outputs and records (<run_dir>/<stage>/)."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    hardware: HardwareConfig = Field(default_factory=HardwareConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    bench: BenchConfig = Field(default_factory=BenchConfig)

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.data.min_chars >= self.data.max_chars:
            raise ValueError("data.min_chars must be below data.max_chars")
        if self.data.min_body_lines > self.data.max_body_lines:
            raise ValueError("data.min_body_lines must not exceed data.max_body_lines")
        if self.export.quantize and not self.export.onnx:
            raise ValueError(
                "export.quantize: the quantized artifacts are made from the ONNX one; set export.onnx=true"
            )
        ev = self.eval
        if (
            self.serve.backend == "triton"
            and not (ev.local or ev.endpoint)
            and (ev.samples_per_task > 1 or ev.temperature > 0)
        ):
            raise ValueError(
                "eval.samples_per_task: the Triton model decodes greedily (one sample at temperature 0); "
                "sample with serve.backend=vllm or eval.local=true"
            )
        _check_train(self.train)
        d = self.data
        if d.format == "jsonl" and not d.jsonl_files:
            raise ValueError("data.jsonl_files: format=jsonl needs at least one file")
        if d.format != "jsonl" and not d.sources and not d.manifest:
            raise ValueError("data.sources: give at least one source directory (or data.manifest)")
        return self

    def stage_dir(self, stage: str) -> Path:
        return Path(self.run_dir) / stage

    def digest(self) -> str:
        blob = json.dumps(self.model_dump(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def preset_names() -> list[str]:
    files = resources.files("ferrylm") / "presets"
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".yaml"))


def _read_yaml(source: str) -> dict:
    path = Path(source)
    if path.suffix not in (".yaml", ".yml") and source in preset_names():
        text = (resources.files("ferrylm") / "presets" / f"{source}.yaml").read_text()
    elif path.is_file():
        text = path.read_text()
    else:
        raise ConfigError(f"config: {source!r} is neither a file nor a preset ({', '.join(preset_names())})")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config: {source} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config: {source} must hold a mapping at the top level")
    return data


def _apply_override(data: dict, item: str) -> None:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {item!r}: expected key=value, e.g. train.learning_rate=1e-4")
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {key}: {part} is not a section")
    # YAML parsing gives numbers, booleans, null and lists the same types a file would.
    node[parts[-1]] = yaml.safe_load(raw) if raw != "" else ""


# Keys given a new name: the old one is refused with one line naming the new (no alias to keep).
RENAMED = {
    "train.kl_to_base": "train.drift_penalty",
    "eval.repo_tasks": "own-code, one of eval.benchmarks (true: list it; false: leave it out)",
}


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "config"
    if first["type"] == "extra_forbidden":
        if key in RENAMED:
            return f"{key}: renamed {RENAMED[key]} (docs/CHANGELOG.md)"
        return f"{key}: unknown key (check the spelling)"
    msg = first["msg"].removeprefix("Value error, ")
    if key == "config" and msg.split(" ", 1)[0].rstrip(":").count(".") == 1:
        return msg  # a cross-field rule already names its key
    got = first.get("input")
    shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
    return f"{key}: {msg}{shown}"


def _validated(data: dict, overrides: tuple[str, ...] | list[str]) -> Config:
    for item in overrides:
        _apply_override(data, item)
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_one_line(e)) from None


def derive(cfg: Config, overrides: tuple[str, ...] | list[str]) -> Config:
    """`cfg` with dotted overrides applied, validated again (a bench trial's config from the user's)."""
    return _validated(cfg.model_dump(mode="json"), overrides)


def load_config(source: str | None = None, overrides: tuple[str, ...] | list[str] = ()) -> Config:
    """Load a preset name or YAML path (None → the `default` preset), apply `a.b=value` overrides."""
    return _validated(_read_yaml(source or "default"), overrides)


def _check_fsdp(t: TrainConfig) -> None:
    """What FSDP2 is not run with here, one line each."""
    refused = {
        "train.deepspeed": (t.deepspeed, "one sharding at a time: unset train.deepspeed or train.fsdp"),
        "train.method": (t.method == "qlora", "qlora's 4-bit weights are not sharded by FSDP2 here; use lora"),
        "train.canary_tasks": (t.canary_tasks, "the canary generates in one process; not with train.fsdp"),
        "train.compile": (t.compile != "none", "not compiled under FSDP2 here; set train.compile=none"),
        "train.checkpoint_fraction": (
            t.gradient_checkpointing and t.checkpoint_fraction < 1,
            "FSDP2 checkpoints every decoder layer or none; set 1 or train.gradient_checkpointing=false",
        ),
    }
    for key, (bad, why) in refused.items():
        if bad:
            raise ValueError(f"{key}: {why}")


def _check_train(t: TrainConfig) -> None:
    """The train section's rules across its keys."""
    if t.offload_optimizer and not t.deepspeed:
        raise ValueError(
            "train.offload_optimizer: optimizer offload is DeepSpeed's; set train.deepspeed=zero2 or zero3 "
            "(with train.fsdp: train.offload_params offloads the optimizer step too)"
        )
    if t.offload_params and t.deepspeed != "zero3" and not t.fsdp:
        raise ValueError("train.offload_params: parameter offload needs train.deepspeed=zero3 or train.fsdp")
    if t.fsdp:
        _check_fsdp(t)
    if t.drift_penalty and t.method == "full":
        raise ValueError("train.drift_penalty: the base is the model with its adapters off; needs method lora or qlora")
    if t.drift_penalty and t.liger and t.compile == "layers":
        raise ValueError(
            "train.liger: with the drift penalty Liger keeps to the decoder's layers, which train.compile=layers "
            "compiles already; set one of them"
        )
    if t.canary_tasks and not t.keep_best:
        raise ValueError("train.canary_tasks: the canary chooses the checkpoint kept; set train.keep_best=true")
    if t.canary_tasks and t.deepspeed:
        raise ValueError("train.canary_tasks: the canary generates in one process; not with train.deepspeed")
    if t.keep_best and t.save_steps == 0:
        raise ValueError("train.keep_best: keeping the best checkpoint needs checkpoints; set train.save_steps")
    if t.zero3_leaf_layers and t.method != "full" and not (t.gradient_checkpointing and t.checkpoint_fraction == 1):
        # DeepSpeed 0.19.8 then fails in backward: a leaf layer's adapter weights are not gathered.
        raise ValueError(
            "train.zero3_leaf_layers: with an adapter only when every layer is checkpointed "
            "(train.gradient_checkpointing=true, train.checkpoint_fraction=1)"
        )
    if t.base_precision == "fp8" and (t.method != "lora" or t.deepspeed or t.fsdp):
        raise ValueError(
            "train.base_precision: fp8 is for method=lora without DeepSpeed or FSDP2 (qlora's base is already "
            "4-bit, a full fine-tune trains the base, both sharders cast the weights they shard to their own precision)"
        )
    if t.method == "qlora" and t.deepspeed == "zero3":
        raise ValueError("train.deepspeed: 4-bit QLoRA weights cannot be sharded by ZeRO-3; use zero2 or none")
    if t.compile != "none" and (t.method == "qlora" or t.deepspeed == "zero3"):
        raise ValueError(
            "train.compile: not with qlora or zero3 (4-bit layers and ZeRO-3's weight-gathering "
            "hooks are not compiled here); set train.compile=none"
        )
    if t.compile == "model" and t.liger:
        # Measured on an H100: the compiler's wrapping of Liger's Triton kernels gave wrong losses,
        # then an illegal memory access.
        raise ValueError(
            "train.compile: model-wide compilation breaks Liger's kernels; use train.compile=layers "
            "with train.liger=true"
        )
