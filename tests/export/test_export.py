"""Merge a real trained adapter into the tiny Qwen2, with parity and lineage; refuse an untrained one."""
import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from ferrylm.export import ExportError, run_export
from ferrylm.train import run_train


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, tiny_data_run, tiny_qwen2_dir, tiny_corpus):
    import shutil

    run = tmp_path_factory.mktemp("export") / "run"
    shutil.copytree(tiny_data_run, run)
    from tests.conftest import tiny_config  # noqa: E402 (module-scoped fixture cannot take make_config)

    cfg = tiny_config(run, tiny_qwen2_dir, tiny_corpus, "train.max_steps=4")
    run_train(cfg)
    return run, cfg


def test_merged_model_matches_adapter_and_carries_manifest(trained_run):
    run, cfg = trained_run
    rec = run_export(cfg)
    merged = run / "export" / "merged"
    manifest = json.loads((merged / "manifest.json").read_text())
    p = manifest["parity"]
    assert p["greedy_tokens_equal"] == p["prompts"] == cfg.export.parity_prompts
    assert p["token_agreement"] == 1.0
    assert p["max_abs_logit_diff"] < 1e-3
    assert set(manifest["inputs"]) >= {"base_model", "adapter_sha256", "dataset_train_sha256", "config_digest"}
    gen = json.loads((merged / "generation_config.json").read_text())
    tok = json.loads((merged / "tokenizer_config.json").read_text())
    assert gen["eos_token_id"] == 2 and tok["eos_token"] == "<|im_end|>"
    assert (merged / "chat_template.jinja").is_file() or "chat_template" in tok
    # The merged weights differ from the base: the adapter was really folded in.
    base = AutoModelForCausalLM.from_pretrained(cfg.model.path)
    model = AutoModelForCausalLM.from_pretrained(merged)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(dict(base.named_parameters())[name], dict(model.named_parameters())[name])
    triton = run / "triton_models" / "ferrylm"
    config = (triton / "config.pbtxt").read_text()
    assert "decoupled: true" in config and str(merged.resolve()) in config
    assert 'key: "site_packages"' in config  # where the stub finds torch and transformers
    compile((triton / "1" / "model.py").read_text(), "model.py", "exec")
    assert rec.outputs["merged"] == str(merged)


def test_untrained_adapter_is_refused_and_nothing_written(trained_run, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    run, cfg = trained_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("export", "triton_models"))
    adapter = copy / "train" / "adapter" / "adapter_model.safetensors"
    weights = load_file(adapter)
    save_file({k: torch.zeros_like(v) if "lora_B" in k else v for k, v in weights.items()}, adapter)
    rec = json.loads((copy / "train" / "record.json").read_text())
    rec["outputs"]["adapter"] = str(copy / "train" / "adapter")
    (copy / "train" / "record.json").write_text(json.dumps(rec))
    cfg2 = cfg.model_copy(update={"run_dir": str(copy)})
    with pytest.raises(ExportError, match="every LoRA B matrix is zero"):
        run_export(cfg2)
    assert not (copy / "export").exists()
