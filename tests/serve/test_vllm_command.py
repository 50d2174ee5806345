"""The vLLM command line for GPU deployments (tensor / data parallel, memory share, pass-through
flags), built and checked on this CPU machine by telling the server it has the CUDA build."""

import json

import pytest

from ferrylm.config import ConfigError, load_config
from ferrylm.serve import ServeError, server_for, vllm_server

QWEN7B = {"num_attention_heads": 28, "num_key_value_heads": 4}


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN7B))
    return tmp_path


def _server(model_dir, tmp_path, *overrides):
    cfg = load_config("default", [f"run_dir={tmp_path / 'run'}", *overrides])
    return server_for(cfg, model_dir, port=18123)


def test_the_cuda_build_gets_the_parallel_layout_and_passthrough_flags(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: False)
    monkeypatch.setattr(vllm_server, "gpus_present", lambda: 8)
    server = _server(
        model_dir,
        tmp_path,
        "serve.tensor_parallel=4",
        "serve.data_parallel=2",
        "serve.gpu_memory_utilization=0.85",
        "serve.vllm_args=[--enable-prefix-caching,--max-num-seqs,64]",
    )
    server.check()
    cmd = server.command()
    assert cmd[cmd.index("--served-model-name") + 2 :] == [
        "--tensor-parallel-size",
        "4",
        "--gpu-memory-utilization",
        "0.85",
        "--data-parallel-size",
        "2",
        "--enable-prefix-caching",
        "--max-num-seqs",
        "64",
    ]
    assert not {"VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_INT4_W4A8", "VLLM_CPU_NUM_OF_RESERVED_CPU"} & set(server.env())


def test_the_cpu_build_gets_its_kv_cache_and_no_gpu_flags(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: True)
    monkeypatch.delenv("VLLM_CPU_INT4_W4A8", raising=False)
    server = _server(model_dir, tmp_path, "serve.kv_cache_gib=3")
    cmd = server.command()
    assert "--tensor-parallel-size" not in cmd and "--gpu-memory-utilization" not in cmd
    assert server.env()["VLLM_CPU_KVCACHE_SPACE"] == "3"
    # 4-bit weights with bf16 activations, as exported (its default on AMX CPUs is int8 activations)
    assert server.env()["VLLM_CPU_INT4_W4A8"] == "0"
    monkeypatch.setenv("VLLM_CPU_INT4_W4A8", "1")  # a user's choice stands
    assert server.env()["VLLM_CPU_INT4_W4A8"] == "1"
    # Both cores of a two-core machine compute; a larger one keeps vLLM's reserved core.
    monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU", raising=False)
    for cpus, reserved in ((2, "0"), (8, None)):
        monkeypatch.setattr(vllm_server, "_usable_cpus", lambda cpus=cpus: cpus)
        assert server.env().get("VLLM_CPU_NUM_OF_RESERVED_CPU") == reserved
    with pytest.raises(ServeError, match="CPU build serves one process"):
        _server(model_dir, tmp_path, "serve.tensor_parallel=2").check()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["serve.tensor_parallel=3"], "28 attention heads and 4 KV heads.*try 2"),
        (["serve.tensor_parallel=2", "serve.data_parallel=2"], "= 4 GPUs, but 2 are present"),
        (["serve.vllm_args=[--port=9000]"], "serve.vllm_args: --port is set from the serve config"),
    ],
)
def test_a_layout_the_gpus_cannot_hold_is_refused_before_start(model_dir, tmp_path, monkeypatch, overrides, message):
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: False)
    monkeypatch.setattr(vllm_server, "gpus_present", lambda: 2)
    with pytest.raises(ServeError, match=message):
        _server(model_dir, tmp_path, *overrides).check()


def test_tensor_parallel_may_exceed_the_kv_heads_when_it_replicates_them(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: False)
    monkeypatch.setattr(vllm_server, "gpus_present", lambda: 8)
    _server(model_dir, tmp_path, "serve.tensor_parallel=4").check()
    vllm_server.Parallel(tensor=4).check(
        {"num_attention_heads": 32, "num_key_value_heads": 2}, False, 8
    )  # 2 copies each
    with pytest.raises(ServeError, match="try 4"):
        vllm_server.Parallel(tensor=8).check(QWEN7B, False, 8)  # 28 heads do not split 8 ways


@pytest.mark.parametrize("bad", ["serve.tensor_parallel=0", "serve.gpu_memory_utilization=1.5"])
def test_bad_values_name_the_key(bad):
    with pytest.raises(ConfigError, match=bad.split("=")[0]):
        load_config("default", [bad])


SMOLLM2 = {"hidden_size": 576, "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536}
QWEN7B_FULL = {**QWEN7B, "hidden_size": 3584, "intermediate_size": 18944}


def _w4a16(model_dir, shapes, group):
    quant = {
        "format": "pack-quantized",
        "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": group}}},
    }
    (model_dir / "config.json").write_text(json.dumps({**shapes, "quantization_config": quant}))
    return model_dir


def test_a_4bit_artifact_vllms_gpu_kernels_cannot_run_is_refused_before_start(tmp_path, monkeypatch):
    # On an H100, vLLM 0.22.0 died loading SmolLM2's W4A16 ("input_size_per_partition = 576 is not divisible by
    # min_thread_k = 128"); the check says so before a GPU is touched.
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: False)
    monkeypatch.setattr(vllm_server, "gpus_present", lambda: 8)
    (tmp_path / "m").mkdir()
    with pytest.raises(ServeError, match="q/k/v takes 576 inputs, not a multiple of 128 .*serve.backend=triton"):
        _server(_w4a16(tmp_path / "m", SMOLLM2, 32), tmp_path).check()
    _server(_w4a16(tmp_path / "m", QWEN7B_FULL, 32), tmp_path).check()  # Qwen2.5-7B's widths fit
    _server(_w4a16(tmp_path / "m", QWEN7B_FULL, 128), tmp_path, "serve.tensor_parallel=4").check()
    # Eight ways, a Llama-like model with Qwen2.5-7B's MLP splits its heads but not its down_proj's inputs.
    assert (
        vllm_server.marlin_refusal(
            QWEN7B_FULL | {"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128}, 128, 8
        )
        == "down_proj takes 2368 inputs per GPU at serve.tensor_parallel=8, not a multiple of 128 (Marlin's tile) "
        "and of the group size"
    )
    assert "group size 256" in vllm_server.marlin_refusal(QWEN7B_FULL, 256)
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: True)
    monkeypatch.setattr(vllm_server, "_cpu_flag", lambda flag: True)
    _server(_w4a16(tmp_path / "m", SMOLLM2, 32), tmp_path).check()  # the CPU build runs it (tested end to end)


def test_without_flashinfer_the_cuda_build_samples_in_torch(model_dir, tmp_path, monkeypatch):
    # vLLM 0.22.0's CUDA sampler imported flashinfer at start and died without it (H100, 2026-11-25).
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: False)
    monkeypatch.delenv("VLLM_USE_FLASHINFER_SAMPLER", raising=False)
    monkeypatch.setattr(vllm_server.importlib.util, "find_spec", lambda name: None)
    assert _server(model_dir, tmp_path).env()["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    monkeypatch.setenv("VLLM_USE_FLASHINFER_SAMPLER", "1")  # a user's choice stands
    assert _server(model_dir, tmp_path).env()["VLLM_USE_FLASHINFER_SAMPLER"] == "1"
