"""Merge a real trained adapter into the tiny Qwen2, with parity and lineage; refuse an untrained one."""

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from ferrylm.export import ExportError, run_export
from ferrylm.train import run_train
from tests.pinning import int8_products


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
    assert p["token_agreement"] == p["forced_agreement"] == 1.0
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
    # The model is Llama-family: the repository streams from ferrylm's fused engine ("auto").
    assert 'key: "engine" value: { string_value: "fused" }' in config and rec.metrics["triton_engine"] == "fused"
    assert f'key: "max_len" value: {{ string_value: "{cfg.export.triton_max_len}" }}' in config
    compile((triton / "1" / "model.py").read_text(), "model.py", "exec")
    assert rec.outputs["merged"] == str(merged)
    # The variant for Triton images with the vLLM backend: vLLM's engine arguments in model.json.
    vllm_variant = run / "triton_models" / "ferrylm-vllm"
    assert 'backend: "vllm"' in (vllm_variant / "config.pbtxt").read_text()
    assert json.loads((vllm_variant / "1" / "model.json").read_text())["model"] == str(merged.resolve())


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


def test_streaming_merge_equals_peft_merge_and_keeps_shards(trained_run, tmp_path, tiny_qwen2_dir):
    from peft import PeftModel

    from ferrylm.export.merge import stream_merge

    run, cfg = trained_run
    adapter = run / "train" / "adapter"
    sharded = tmp_path / "base-sharded"
    AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir).save_pretrained(sharded, max_shard_size="2MB")
    shards = sorted(p.name for p in sharded.glob("*.safetensors"))
    assert len(shards) > 1
    info = stream_merge(sharded, adapter, tmp_path / "merged")
    assert sorted(p.name for p in (tmp_path / "merged").glob("*.safetensors")) == shards
    assert info["weights_merged"] == 2 * 7 and info["max_abs_delta"] > 0  # 2 layers × 7 linear layers
    ours = dict(AutoModelForCausalLM.from_pretrained(tmp_path / "merged").named_parameters())
    peft = dict(
        PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_qwen2_dir), adapter)
        .merge_and_unload()
        .named_parameters()
    )
    assert ours.keys() == peft.keys()
    assert max((ours[k] - peft[k]).abs().max().item() for k in ours) < 1e-6
    info16 = stream_merge(sharded, adapter, tmp_path / "merged-bf16", dtype="bfloat16")
    assert info16["dtype"] == "bfloat16"
    m16 = AutoModelForCausalLM.from_pretrained(tmp_path / "merged-bf16", dtype="auto")
    assert m16.dtype == torch.bfloat16


def _copy_without_export(run: Path, copy: Path) -> Path:
    """The trained run copied (its record pointing at the copy's adapter), with no export yet."""
    import shutil

    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("export", "triton_models"))
    rec = json.loads((copy / "train" / "record.json").read_text())
    rec["outputs"]["adapter"] = str(copy / "train" / "adapter")
    (copy / "train" / "record.json").write_text(json.dumps(rec))
    return copy


@pytest.mark.slow
def test_onnx_artifacts_carry_parity_and_refuse_below_threshold(trained_run, tmp_path):
    import shutil

    from ferrylm.export.onnx import OnnxCausalLM
    from ferrylm.models import load_tokenizer

    run, cfg = trained_run
    copy = _copy_without_export(run, tmp_path / "run")
    export = cfg.export.model_copy(
        update={
            "onnx": True,
            "quantize": ["int8", "int4"],
            "quantized_min_agreement": 0.0,
            "triton_dir": str(copy / "triton_models"),
        }
    )
    cfg2 = cfg.model_copy(update={"run_dir": str(copy), "export": export})
    out = run_export(cfg2)
    onnx = out.metrics["onnx"]
    assert set(onnx) == {"fp32", "int8", "int4"}
    fp32 = onnx["fp32"]["parity"]
    assert (
        fp32["greedy_tokens_equal"] == fp32["prompts"] and fp32["max_abs_logit_diff"] < 1e-3 and fp32["mean_kl"] < 1e-6
    )
    assert fp32["forced_agreement"] == 1.0
    for name in ("int8", "int4"):
        p = onnx[name]["parity"]
        assert 0 <= p["token_agreement"] <= 1 and 0 <= p["forced_agreement"] <= 1 and p["mean_kl"] > 0
        assert onnx[name]["bytes"] < onnx["fp32"]["bytes"]
        manifest = json.loads((copy / "export" / "onnx" / name / "manifest.json").read_text())
        assert manifest["inputs"]["adapter_sha256"] and manifest["parity"]["reference"] == "base + adapter (PyTorch)"
    # The generation loop on ONNX Runtime gives the merged model's greedy tokens.
    tok = load_tokenizer(copy / "export" / "merged")
    ids = tok("def add(a, b):", add_special_tokens=False)["input_ids"]
    merged = AutoModelForCausalLM.from_pretrained(copy / "export" / "merged")
    want = merged.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False, min_new_tokens=12)[
        0, len(ids) :
    ].tolist()
    assert OnnxCausalLM(copy / "export" / "onnx" / "fp32").generate(ids, 12) == want
    # With the cache kept where it was computed (IO binding, what a GPU uses): the same tokens and logits.
    fed, bound = (OnnxCausalLM(copy / "export" / "onnx" / "fp32", bound=b) for b in (False, True))
    assert bound.bound and bound.generate(ids, 12) == want and bound.generate(ids, 12, (want[3],)) == want[:4]
    assert (bound.prompt_logits(ids) == fed.prompt_logits(ids)).all()
    config = (copy / "triton_models" / "ferrylm-onnx" / "config.pbtxt").read_text()
    assert 'string_value: "onnx"' in config and str((copy / "export" / "onnx" / "fp32").resolve()) in config
    # The repository carries its engine: a Triton environment needs no ferrylm or torch.
    carried = (copy / "triton_models" / "ferrylm-onnx" / "1" / "ferrylm_onnx.py").read_text()
    assert carried == (Path(__file__).parents[2] / "ferrylm" / "export" / "onnx.py").read_text()
    compile((copy / "triton_models" / "ferrylm-onnx" / "1" / "model.py").read_text(), "model.py", "exec")

    # A quantized variant is held to its forced agreement; int8 on this model picks the reference's token
    # at 62 of its 64 steps where the CPU has VNNI (Intel AMX, AMD AVX-512), at 57 on AVX2, whose int8
    # products saturate (measured on each; tests/pinning.py).
    assert onnx["int8"]["parity"]["forced_agreement"] == {"vnni": 62, "avx2": 57}[int8_products()] / 64
    shutil.rmtree(copy / "export" / "onnx")
    above = cfg2.model_copy(
        update={"export": export.model_copy(update={"quantize": ["int8"], "quantized_min_agreement": 1.0})}
    )
    with pytest.raises(
        ExportError, match=r"export.quantize: int8 predicts base \+ adapter \(PyTorch\)'s next greedy token on"
    ):
        run_export(above)
    assert not (copy / "export" / "onnx" / "int8").exists()

    strict = cfg2.model_copy(
        update={"export": export.model_copy(update={"onnx_max_logit_diff": 1e-12, "quantize": []})}
    )
    shutil.rmtree(copy / "export" / "onnx")
    with pytest.raises(ExportError, match="export.onnx: parity failed"):
        run_export(strict)
    assert not (copy / "export" / "onnx" / "fp32").exists() and not list((copy / "export" / "onnx").glob(".*"))


@pytest.mark.slow
def test_vllm_artifacts_w4a16_and_fp8_carry_parity_and_serve_their_own_integers(trained_run, tmp_path):
    """compressed-tensors W4A16 (pack-quantized) and FP8 (float-quantized) artifacts: the config vLLM
    reads, smaller files, parity read back through transformers' loader; the batch-1 engine runs the
    W4A16 artifact's own integers and scales on torch's int4 kernel and agrees with that loader."""
    from ferrylm.engine import Engine
    from ferrylm.export.vllm_quant import load_compressed

    run, cfg = trained_run
    copy = _copy_without_export(run, tmp_path / "run")
    export = cfg.export.model_copy(
        update={
            "vllm_quantize": ["w4a16", "fp8"],
            "w4a16_group_size": 32,
            "quantized_min_agreement": 0.0,
            "triton_dir": str(copy / "triton_models"),
        }
    )
    cfg2 = cfg.model_copy(update={"run_dir": str(copy), "export": export})
    out = run_export(cfg2)
    merged_bytes = sum(p.stat().st_size for p in (copy / "export" / "merged").glob("*.safetensors"))
    for kind, fmt, bits in (("w4a16", "pack-quantized", 4), ("fp8", "float-quantized", 8)):
        art = copy / "export" / f"vllm-{kind}"
        assert out.outputs[f"vllm_{kind}"] == str(art)
        q = json.loads((art / "config.json").read_text())["quantization_config"]
        assert q["quant_method"] == "compressed-tensors" and q["format"] == fmt and q["ignore"] == ["lm_head"]
        assert q["config_groups"]["group_0"]["weights"]["num_bits"] == bits
        manifest = json.loads((art / "manifest.json").read_text())
        p = manifest["parity"]
        assert p["reference"] == "base + adapter (PyTorch)" and 0 <= p["token_agreement"] <= 1 and p["mean_kl"] > 0
        assert manifest["inputs"]["adapter_sha256"] and manifest["layers_quantized"] == 2 * 7
        assert sum(f.stat().st_size for f in art.glob("*.safetensors")) < merged_bytes
        assert (art / "tokenizer_config.json").is_file()
    assert (
        json.loads((copy / "export" / "vllm-w4a16" / "config.json").read_text())["quantization_config"][
            "config_groups"
        ]["group_0"]["weights"]["group_size"]
        == 32
    )

    art = copy / "export" / "vllm-w4a16"
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["method"].startswith("GPTQ") and manifest["calibration_rows"] == 128
    # GPTQ moved integers away from plain rounding; with export.w4a16_method=rtn the engine's own rounding
    # (used where no artifact is at hand, as in the GPU benchmark) gives the artifact's integers exactly.
    from ferrylm.engine.kernels.int4 import read_w4a16, round_to_nearest_int4

    merged = AutoModelForCausalLM.from_pretrained(copy / "export" / "merged", dtype=torch.bfloat16)
    q, scale = round_to_nearest_int4(merged.model.layers[1].mlp.down_proj.weight, 32)
    gptq = read_w4a16(art)["model.layers.1.mlp.down_proj"]
    assert gptq[2] == 32 and not torch.equal(q, gptq[0])
    rtn_cfg = cfg2.model_copy(
        update={"export": export.model_copy(update={"vllm_quantize": ["w4a16"], "w4a16_method": "rtn"})}
    )
    run_export(rtn_cfg)
    assert json.loads((art / "manifest.json").read_text())["method"].startswith("round-to-nearest")
    stored = read_w4a16(art)["model.layers.1.mlp.down_proj"]
    assert torch.equal(q, stored[0]) and torch.equal(scale, stored[1]) and stored[2] == 32
    model = load_compressed(art)
    ids = torch.tensor([[5, 17, 300, 4000, 12, 99]])
    with torch.no_grad():
        want = model(ids).logits.float()  # decompresses the weights to bf16
        engine = Engine(model, max_len=32, compile=False, tune=False, w4a16_dir=str(art))
        got = engine.decoder(ids, torch.arange(6)).float()
    assert (got - want).abs().max().item() < 0.02 * want.abs().max().item()

    # A Triton model on the W4A16 artifact: the fused engine runs its own 4-bit weights.
    config = (copy / "triton_models" / "ferrylm-w4a16" / "config.pbtxt").read_text()
    assert out.outputs["triton_model_w4a16"] == str(copy / "triton_models" / "ferrylm-w4a16")
    assert str(art.resolve()) in config and 'key: "w4a16" value: { string_value: "1" }' in config

    bad = cfg2.model_copy(
        update={"export": export.model_copy(update={"vllm_quantize": ["w4a16"], "w4a16_group_size": 128})}
    )
    with pytest.raises(ExportError, match=r"export.w4a16_group_size=128 does not divide the 64 inputs .*use 64"):
        run_export(bad)
    assert not list((copy / "export").glob(".vllm-*"))


def test_triton_engine_choice_follows_the_architecture(tmp_path):
    """export.triton_engine: "auto" takes the fused engine for Llama-family models and generate() for
    others; asking for "fused" on another architecture is one clear error."""
    from ferrylm.export.stage import _triton_engine

    llama, gpt2 = tmp_path / "llama", tmp_path / "gpt2"
    for path, kind in ((llama, "llama"), (gpt2, "gpt2")):
        path.mkdir()
        (path / "config.json").write_text(json.dumps({"model_type": kind}))
    assert _triton_engine("auto", llama) == "fused" and _triton_engine("transformers", llama) == "transformers"
    assert _triton_engine("auto", gpt2) == "transformers"
    with pytest.raises(ExportError, match="export.triton_engine=fused: the fused engine supports llama"):
        _triton_engine("fused", gpt2)
