"""Expected failures are one line, exit 2, and answered before any heavy import (torch, transformers)."""

import json
import re
import subprocess
import sys

import pytest

from ferrylm.cli import main
from ferrylm.models import ModelNotFound, load_tokenizer

_PROBE = """
import sys, json
from ferrylm.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "heavy": sorted(m for m in ("torch", "transformers", "vllm") if m in sys.modules)}))
"""


@pytest.mark.parametrize(
    "args, says",
    [
        (["train", "train.lora_rr=3"], "train.lora_rr: unknown key"),
        (["data", "data.sources=[/no/such/dir]"], "data.sources: /no/such/dir is not a directory"),
        (["train", "model.path=/no/such/model"], "model.path: /no/such/model is not a Hugging Face model directory"),
        (["train", "run_dir={tmp}"], "data/record.json is missing: run `ferrylm data` first"),
        (["export", "run_dir={tmp}"], "data/record.json is missing: run `ferrylm data` first"),
        (["serve", "run_dir={tmp}"], "export/record.json is missing: run `ferrylm export` first"),
        (["eval", "run_dir={tmp}"], "data/record.json is missing: run `ferrylm data` first"),
        (["humaneval", "--samples", "{tmp}/none.jsonl"], "--samples: "),
    ],
)
def test_config_and_path_errors_are_one_line_without_heavy_imports(tmp_path, args, says):
    args = [a.format(tmp=tmp_path) for a in args]
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=120)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"code": 2, "heavy": []}, done.stderr
    err = [line for line in done.stderr.splitlines() if line.startswith("ferrylm:")]
    assert len(err) == 1 and says in err[0], done.stderr


def test_a_model_directory_without_a_tokenizer_is_one_line(tmp_path, tiny_qwen2_dir, capsys):
    import shutil

    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(tiny_qwen2_dir / "config.json", bare / "config.json")
    # transformers may build a bare tokenizer from config.json alone; either way it is one line.
    says = "no tokenizer could be loaded|the tokenizer has no chat template"
    with pytest.raises(ModelNotFound, match=says):
        load_tokenizer(bare)
    assert main(["data", f"run_dir={tmp_path / 'run'}", f"model.path={bare}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(says, err[0]), err


def test_every_command_the_parser_knows_has_its_function():
    from ferrylm import cli

    sub = next(a for a in cli._parser()._actions if a.dest == "command")
    assert set(sub.choices) == set(cli.COMMANDS)


def test_an_export_option_whose_package_is_missing_is_one_line_before_any_work(tmp_path):
    """Seen on a GPU machine: compressed-tensors absent, the export merged and checked the model and then
    died in a traceback. Now it is refused first, naming the key and what to install."""
    hide = "import sys; sys.modules['compressed_tensors'] = None\n"
    done = subprocess.run(
        [sys.executable, "-c", hide + _PROBE, "export", f"run_dir={tmp_path}", "export.vllm_quantize=[w4a16]"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"code": 2, "heavy": []}, done.stderr
    err = [line for line in done.stderr.splitlines() if line.startswith("ferrylm:")]
    assert err == [
        "ferrylm: error: export.vllm_quantize: needs compressed-tensors, which is not installed "
        "(pip install compressed-tensors==0.17.0; `make install` does it)"
    ], done.stderr
