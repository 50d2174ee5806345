import pytest

from ferrylm.cli import main
from ferrylm.config import ConfigError, load_config, preset_names


def test_default_preset_loads_with_overrides():
    cfg = load_config("default", ["train.learning_rate=1e-4", "data.sources=[/a, /b]", "eval.endpoint=null"])
    assert cfg.train.learning_rate == 1e-4
    assert cfg.data.sources == ["/a", "/b"]
    assert cfg.eval.endpoint is None
    assert "default" in preset_names()


@pytest.mark.parametrize("override, message", [
    ("train.learnig_rate=1e-4", "train.learnig_rate: unknown key"),
    ("train.max_steps=-3", "train.max_steps: Input should be greater than 0 (got -3)"),
    ("train.precision=fp8", "train.precision: Input should be 'auto', 'bf16' or 'fp32' (got 'fp8')"),
    ("serve.port=70000", "serve.port: Input should be less than 65536 (got 70000)"),
    ("nonsense", "override 'nonsense': expected key=value"),
])
def test_bad_values_name_the_key_in_one_line(override, message):
    with pytest.raises(ConfigError) as e:
        load_config("default", [override])
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


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
    assert err == f"ferrylm: error: model.path: {tmp_path / 'no-model'} is not a Hugging Face model directory (no config.json)"
    assert not (tmp_path / "run" / "data").exists()
