"""Bad serve input fails before anything starts: occupied port, missing model, no export."""

import signal
import socket

import pytest

from ferrylm.cli import main
from ferrylm.config import load_config
from ferrylm.serve import ServeError, served_model_dir, server_for


def test_occupied_port_is_one_clear_error(tmp_path, tiny_qwen2_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cfg = load_config("default", [f"run_dir={tmp_path}", f"serve.port={port}"])
        server = server_for(cfg, tiny_qwen2_dir)
        with pytest.raises(ServeError, match=f"serve.port: 127.0.0.1:{port} is already in use"):
            server.start()
        assert server.proc is None  # nothing was launched


def test_missing_model_and_missing_export(tmp_path, capsys):
    cfg = load_config("default", [f"run_dir={tmp_path}"])
    with pytest.raises(ServeError, match="no config.json"):
        server_for(cfg, tmp_path / "nope").start()
    with pytest.raises(ServeError, match="holds no export"):
        served_model_dir(cfg)
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert main(["serve", f"run_dir={tmp_path}", f"serve.model={tmp_path / 'nope'}"]) == 2
    assert capsys.readouterr().err.strip().startswith("ferrylm: error: serve.model:")
    # The stage's stop handlers are put back: the caller's process (and what it forks) keeps its own.
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers


def test_lora_serving_needs_an_adapter(tmp_path, tiny_qwen2_dir):
    from ferrylm.serve import lora_server_for

    cfg = load_config("default", [f"run_dir={tmp_path}", "serve.lora=true"])
    with pytest.raises(ServeError, match="serve.lora: .* holds no training run"):
        lora_server_for(cfg)
    server = server_for(cfg, tiny_qwen2_dir, lora_dir=tmp_path / "not-an-adapter")
    with pytest.raises(ServeError, match="serve.lora: .* is not a LoRA adapter"):
        server.start()
    assert server.proc is None


def test_quantized_artifact_must_have_been_exported(tmp_path):
    from ferrylm.manifest import StageRecord
    from ferrylm.serve import served_model_dir

    cfg = load_config("default", [f"run_dir={tmp_path}", "serve.artifact=w4a16"])
    rec = StageRecord("export", cfg.digest())
    rec.outputs = {"merged": str(tmp_path / "export" / "merged"), "vllm_fp8": str(tmp_path / "export" / "vllm-fp8")}
    rec.finish(cfg.stage_dir("export"))
    with pytest.raises(ServeError, match=r"serve.artifact=w4a16: .*export.vllm_quantize=\[w4a16\]"):
        served_model_dir(cfg)
    fp8 = load_config("default", [f"run_dir={tmp_path}", "serve.artifact=fp8"])
    assert served_model_dir(fp8) == tmp_path / "export" / "vllm-fp8"
    assert served_model_dir(load_config("default", [f"run_dir={tmp_path}"])) == tmp_path / "export" / "merged"
    # the eval asking for an artifact the export did not write (eval.artifacts): one line naming its own key
    from ferrylm.serve import artifact_dir

    with pytest.raises(ServeError, match=r"eval.artifacts=w4a16: .*export.vllm_quantize=\[w4a16\]"):
        artifact_dir(cfg, "w4a16", "eval.artifacts")
    assert artifact_dir(cfg, "fp8", "eval.artifacts") == tmp_path / "export" / "vllm-fp8"


# Lines as vLLM 0.22.0 logged them on an H100 when it could not run a 4-bit artifact (engine process first, the
# API process's generic error last), trimmed.
_VLLM_DIED = r"""(EngineCore pid=29629) ERROR 11-25 22:05:22 [core.py:1165] Traceback (most recent call last):
(EngineCore pid=29629) ERROR 11-25 22:05:22 [core.py:1165]   File "vllm/model_executor/kernels/linear/__init__.py", line 678, in choose_mp_linear_kernel
(EngineCore pid=29629) ERROR 11-25 22:05:22 [core.py:1165]     raise ValueError(
(EngineCore pid=29629) ERROR 11-25 22:05:22 [core.py:1165] ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: 
(EngineCore pid=29629) ERROR 11-25 22:05:22 [core.py:1165]  MacheteLinearKernel cannot implement due to: Group size (32) not supported by Machete, supported group sizes are: [-1, 64, 128]
(EngineCore pid=29629) ERROR 11-25 22:05:22 [core.py:1165]  MarlinLinearKernel cannot implement due to: Weight input_size_per_partition = 576 is not divisible by min_thread_k = 128.
(EngineCore pid=29629) Process EngineCore:
(EngineCore pid=29629) Traceback (most recent call last):
(APIServer pid=29493) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"""


def test_a_server_that_dies_starting_shows_its_first_error_from_this_start(tmp_path):
    import sys

    from ferrylm.serve.process import ManagedServer

    class Dies(ManagedServer):
        kind = "vLLM"

        def command(self):
            return [sys.executable, "-c", f"print({_VLLM_DIED!r}); raise SystemExit(1)"]

    log = tmp_path / "vllm.log"
    log.write_text("(EngineCore pid=934) ModuleNotFoundError: No module named 'flashinfer'\n")  # an earlier start's
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServeError) as err:
        Dies("127.0.0.1", port, log, startup_timeout_s=60, drain_timeout_s=5).start()
    assert str(err.value).splitlines() == [
        f"vLLM exited with code 1 while starting; the first error in {log}:",
        "ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons:",
        " MacheteLinearKernel cannot implement due to: Group size (32) not supported by Machete, supported group sizes "
        "are: [-1, 64, 128]",
        " MarlinLinearKernel cannot implement due to: Weight input_size_per_partition = 576 is not divisible by "
        "min_thread_k = 128.",
    ]


def test_an_address_beyond_loopback_needs_a_key_or_for_triton_a_proxy(tmp_path, tiny_qwen2_dir, monkeypatch):
    from ferrylm.serve.stage import triton_server_for

    monkeypatch.delenv("FERRYLM_API_KEY", raising=False)
    cfg = load_config("default", [f"run_dir={tmp_path}", "serve.host=0.0.0.0"])
    with pytest.raises(
        ServeError,
        match=r"serve.host=0.0.0.0 opens the endpoint beyond this machine: put the key "
        r"clients must send in \$FERRYLM_API_KEY",
    ):
        server_for(cfg, tiny_qwen2_dir)
    monkeypatch.setenv("FERRYLM_API_KEY", "a-key")
    assert server_for(cfg, tiny_qwen2_dir).env()["VLLM_API_KEY"] == "a-key"
    assert "a-key" not in " ".join(server_for(cfg, tiny_qwen2_dir).command())
    with pytest.raises(ServeError, match="Triton has no authentication of its own"):
        triton_server_for(cfg, repo=tmp_path / "triton_models" / "ferrylm")
    proxied = load_config("default", [f"run_dir={tmp_path}", "serve.host=0.0.0.0", "serve.behind_proxy=true"])
    assert triton_server_for(proxied, repo=tmp_path / "triton_models" / "ferrylm").host == "0.0.0.0"
