import pytest

from ferrylm.cli import main
from ferrylm.config import ConfigError, load_config, preset_names


def test_default_preset_loads_with_overrides():
    cfg = load_config("default", ["train.learning_rate=1e-4", "data.sources=[/a, /b]", "eval.endpoint=null"])
    assert cfg.train.learning_rate == 1e-4
    assert cfg.data.sources == ["/a", "/b"]
    assert cfg.eval.endpoint is None
    assert "default" in preset_names()


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.learnig_rate=1e-4", "train.learnig_rate: unknown key"),
        ("train.max_steps=-3", "train.max_steps: Input should be greater than 0 (got -3)"),
        ("train.precision=fp8", "train.precision: Input should be 'auto', 'bf16', 'fp16' or 'fp32' (got 'fp8')"),
        ("serve.port=70000", "serve.port: Input should be less than 65536 (got 70000)"),
        ("nonsense", "override 'nonsense': expected key=value"),
        ("train.offload_optimizer=true", "train.offload_optimizer: optimizer offload is DeepSpeed's"),
        ("train.offload_params=true", "train.offload_params: parameter offload needs train.deepspeed=zero3 or"),
        ("hardware.gpus=0", "hardware.gpus: Input should be greater than 0"),
        ("train.base_precision=int4", "train.base_precision: Input should be 'model' or 'fp8' (got 'int4')"),
        (
            "eval.benchmarks=[humaneval,mbpp]",
            "eval.benchmarks: unknown benchmark mbpp (known: humaneval, humaneval-x, own-code)",
        ),
        ("eval.benchmarks=[benchmark]", "eval.benchmarks: unknown benchmark benchmark"),  # the seam is not a benchmark
        ("eval.repo_tasks=false", "eval.repo_tasks: renamed own-code, one of eval.benchmarks"),  # no alias kept
        ("train.kl_to_base=1.0", "train.kl_to_base: renamed train.drift_penalty"),
    ],
)
def test_bad_values_name_the_key_in_one_line(override, message):
    with pytest.raises(ConfigError) as e:
        load_config("default", [override])
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_combinations_that_cannot_run_are_refused():
    for other in ("train.method=full", "train.method=qlora", "train.deepspeed=zero2", "train.fsdp=full_shard"):
        with pytest.raises(ConfigError, match="train.base_precision: fp8 is for method=lora without DeepSpeed"):
            load_config("default", ["train.base_precision=fp8", other])
    with pytest.raises(ConfigError, match="train.deepspeed: 4-bit QLoRA weights cannot be sharded by ZeRO-3"):
        load_config("default", ["train.method=qlora", "train.deepspeed=zero3"])
    cfg = load_config("default", ["train.deepspeed=zero3", "train.offload_params=true", "train.offload_optimizer=true"])
    assert cfg.train.offload_params and cfg.train.offload_optimizer
    # DeepSpeed cannot gather a leaf layer's adapter weights in a backward without recomputation.
    with pytest.raises(
        ConfigError, match="train.zero3_leaf_layers: with an adapter only when every layer is checkpointed"
    ):
        load_config(
            "default",
            [
                "train.deepspeed=zero3",
                "train.zero3_leaf_layers=true",
                "train.method=lora",
                "train.gradient_checkpointing=true",
                "train.checkpoint_fraction=0.5",
            ],
        )


@pytest.mark.parametrize(
    "other, message",
    [
        ("train.deepspeed=zero3", "train.deepspeed: one sharding at a time"),
        ("train.method=qlora", "train.method: qlora's 4-bit weights are not sharded by FSDP2 here"),
        (
            "train.gradient_checkpointing=true train.checkpoint_fraction=0.5",
            "train.checkpoint_fraction: FSDP2 checkpoints every decoder layer or none",
        ),
        ("train.compile=layers", "train.compile: not compiled under FSDP2 here"),
        ("train.offload_optimizer=true", "train.offload_optimizer: optimizer offload is DeepSpeed's"),
    ],
)
def test_what_fsdp2_is_not_run_with_is_one_line(other, message):
    with pytest.raises(ConfigError) as e:
        load_config("default", ["train.fsdp=full_shard", *other.split()])
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    cfg = load_config("default", ["train.fsdp=shard_grad_op", "train.offload_params=true", "train.method=full"])
    assert cfg.train.fsdp == "shard_grad_op" and cfg.train.offload_params


def test_yaml_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="neither a file nor a preset"):
        load_config(str(tmp_path / "missing.yaml"))
    ok = tmp_path / "ok.yaml"
    ok.write_text("run_dir: somewhere\ntrain:\n  max_steps: 3\n")
    assert load_config(str(ok)).train.max_steps == 3


def test_cli_prints_one_line_and_exits_2(capsys):
    assert main(["train", "train.lora_rr=4"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "ferrylm: error: train.lora_rr: unknown key (check the spelling)"


def test_missing_model_path_is_one_clear_error(tmp_path, capsys):
    assert main(["data", f"run_dir={tmp_path / 'run'}", f"model.path={tmp_path / 'no-model'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"ferrylm: error: model.path: {tmp_path / 'no-model'} is not a Hugging Face model directory (no config.json), a .gguf file, nor an embedded model (smollm2, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)"
    )
    assert not (tmp_path / "run" / "data").exists()
