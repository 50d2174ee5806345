"""The vLLM command line for GPU deployments (tensor / data parallel, memory share, pass-through
flags), built and checked on this CPU machine by telling the server it has the CUDA build."""
import json

import pytest

from ferrylm.config import ConfigError, load_config
from ferrylm.serve import ServeError, server_for
from ferrylm.serve import vllm_server

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
    server = _server(model_dir, tmp_path, "serve.tensor_parallel=4", "serve.data_parallel=2",
                     "serve.gpu_memory_utilization=0.85", "serve.vllm_args=[--enable-prefix-caching,--max-num-seqs,64]")
    server.check()
    cmd = server.command()
    assert cmd[cmd.index("--served-model-name") + 2:] == [
        "--tensor-parallel-size", "4", "--gpu-memory-utilization", "0.85", "--data-parallel-size", "2",
        "--enable-prefix-caching", "--max-num-seqs", "64"]
    assert "VLLM_CPU_KVCACHE_SPACE" not in server.env()


def test_the_cpu_build_gets_its_kv_cache_and_no_gpu_flags(model_dir, tmp_path):
    server = _server(model_dir, tmp_path, "serve.kv_cache_gib=3")
    cmd = server.command()
    assert "--tensor-parallel-size" not in cmd and "--gpu-memory-utilization" not in cmd
    assert server.env()["VLLM_CPU_KVCACHE_SPACE"] == "3"
    with pytest.raises(ServeError, match="CPU build serves one process"):
        _server(model_dir, tmp_path, "serve.tensor_parallel=2").check()


@pytest.mark.parametrize("overrides, message", [
    (["serve.tensor_parallel=3"], "28 attention heads and 4 KV heads.*try 2"),
    (["serve.tensor_parallel=2", "serve.data_parallel=2"], "= 4 GPUs, but 2 are present"),
    (["serve.vllm_args=[--port=9000]"], "serve.vllm_args: --port is set from the serve config"),
])
def test_a_layout_the_gpus_cannot_hold_is_refused_before_start(model_dir, tmp_path, monkeypatch, overrides, message):
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: False)
    monkeypatch.setattr(vllm_server, "gpus_present", lambda: 2)
    with pytest.raises(ServeError, match=message):
        _server(model_dir, tmp_path, *overrides).check()


def test_tensor_parallel_may_exceed_the_kv_heads_when_it_replicates_them(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_server, "_cpu_build", lambda: False)
    monkeypatch.setattr(vllm_server, "gpus_present", lambda: 8)
    _server(model_dir, tmp_path, "serve.tensor_parallel=4").check()
    vllm_server.Parallel(tensor=4).check({"num_attention_heads": 32, "num_key_value_heads": 2}, False, 8)  # 2 copies each
    with pytest.raises(ServeError, match="try 4"):
        vllm_server.Parallel(tensor=8).check(QWEN7B, False, 8)      # 28 heads do not split 8 ways


@pytest.mark.parametrize("bad", ["serve.tensor_parallel=0", "serve.gpu_memory_utilization=1.5"])
def test_bad_values_name_the_key(bad):
    with pytest.raises(ConfigError, match=bad.split("=")[0]):
        load_config("default", [bad])
