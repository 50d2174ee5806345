"""The `gpu` install profile resolves: pip resolves its whole dependency set against the package
index without installing it, and the torch and transformers vLLM's CUDA build pins are the ones our
code is tested with (the `cpu` profile's, which this suite runs on)."""

import json
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ferrylm.pins import requirements


def _pip(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout)


# slow: pip resolves vLLM's whole CUDA set against the index (~50 s on 2 cores)
@pytest.mark.slow
@pytest.mark.integration
def test_the_gpu_profile_resolves_with_the_pins_the_suite_runs_on(tmp_path):
    if _pip("index", "versions", "vllm", timeout=120).returncode != 0:
        pytest.skip("no package index reachable: the gpu profile's resolution was not checked")
    gpu = requirements("gpu")
    report = tmp_path / "report.json"
    specs = [f"{r.name}{r.specifier}" for r in gpu]  # without the `extra == "gpu"` markers
    out = _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), *specs)
    if out.returncode != 0 and "network connectivity" in out.stderr:
        # A wheel without separate metadata is downloaded whole (onnxruntime-gpu: 255 MB); a dropped
        # connection is the network's failure, not the profile's.
        pytest.skip(f"the index dropped a download: {out.stderr.strip().splitlines()[0][:200]}")
    assert out.returncode == 0, out.stderr[-3000:]
    resolved = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in json.loads(report.read_text())["install"]
    }
    for r in gpu:  # every requirement of the profile holds in the resolved set
        assert r.specifier.contains(Version(resolved[canonicalize_name(r.name)]["version"]).public, prereleases=True), r
    vllm_pins = {Requirement(t).name: Requirement(t) for t in resolved["vllm"]["requires_dist"] if "extra" not in t}
    cpu = {r.name: r for r in requirements("cpu")}
    assert str(vllm_pins["torch"].specifier) == str(cpu["torch"].specifier)  # ==2.13.0 on both builds
    tested = Version(__import__("transformers").__version__)
    assert vllm_pins["transformers"].specifier.contains(tested), (vllm_pins["transformers"], tested)
    assert cpu["transformers"].specifier == next(r for r in gpu if r.name == "transformers").specifier
