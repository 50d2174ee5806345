"""Stopping is prompt: `ferrylm serve` with nothing in flight exits within seconds of Ctrl-C, of a
SIGTERM to it, or of a SIGTERM to its whole process group (what systemd sends), for both backends,
and leaves no process of the server behind. (With a stream in flight: the end-to-end and Triton tests.)
The vLLM server here is also given a key: requests without it or with another are refused."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ferrylm.export.triton import write_triton_repo
from ferrylm.manifest import StageRecord
from ferrylm.serve import free_port
from tests.conftest import CACHE


def _serve(tmp_path, *overrides, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ferrylm",
            "serve",
            f"run_dir={tmp_path / 'run'}",
            f"serve.port={free_port(count=3)}",
            f"model.cache_dir={CACHE}",
            *overrides,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=env,
    )


def _serving(proc: subprocess.Popen) -> str:
    """The URL `ferrylm serve` prints once the server is healthy."""
    for line in proc.stdout:
        if line.startswith("ferrylm: serving"):
            return line.split(" at ")[1].split()[0].removesuffix("/v1")
    pytest.fail(f"the server did not start (exit {proc.wait()})")


def _stop_and_time(proc: subprocess.Popen, how: str, ready: bool = False) -> float:
    if not ready:
        _serving(proc)
    server = [c for c in psutil.Process(proc.pid).children(recursive=True)]
    assert server
    t = time.monotonic()
    if how == "ctrl-c":
        proc.send_signal(signal.SIGINT)
    elif how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    else:  # the whole group, as systemd's stop does
        os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 0
    took = time.monotonic() - t
    time.sleep(0.5)
    left = [c.pid for c in server if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert left == []
    return took


@pytest.mark.slow
@pytest.mark.parametrize("how", ["group"])  # Ctrl-C and SIGTERM share its handler: the Triton cases
def test_idle_vllm_stops_promptly(tmp_path, tiny_qwen2_dir, how):
    import requests

    key = "k3y-" + os.urandom(8).hex()
    proc = _serve(
        tmp_path,
        f"serve.model={tiny_qwen2_dir}",
        "serve.max_model_len=256",
        "serve.api_key_env=TEAM_KEY",
        env={**os.environ, "TEAM_KEY": key},
    )
    url = _serving(proc)
    body = {"model": "ferrylm", "prompt": "def add(a, b):", "max_tokens": 2}
    for headers in ({}, {"Authorization": "Bearer not-the-key"}):  # refused, nothing generated
        r = requests.post(f"{url}/v1/completions", json=body, headers=headers, timeout=60)
        assert r.status_code == 401, r.text
    # The right key is served (the model list: the tiny model's head size is one vLLM's CPU attention lacks).
    r = requests.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=60)
    assert r.status_code == 200 and [m["id"] for m in r.json()["data"]] == ["ferrylm"]
    assert requests.get(f"{url}/v1/models", timeout=60).status_code == 401
    commands = [" ".join(c.cmdline()) for c in psutil.Process(proc.pid).children(recursive=True)]
    assert _stop_and_time(proc, how, ready=True) < 30  # goal 10 s; loose for a loaded CI machine
    assert not any(key in c for c in commands)  # not on a command line
    written = [f for f in tmp_path.rglob("*") if f.is_file() and key.encode() in f.read_bytes()]
    assert written == []  # nor in any file the run wrote (log, record)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "group"])
def test_idle_triton_stops_promptly(tmp_path, tiny_qwen2_dir, how):
    repo = write_triton_repo(tmp_path / "triton_models", "ferrylm", tiny_qwen2_dir, engine="transformers")
    record = StageRecord("export", "test")  # serve finds the repository through the export's record
    record.outputs = {"triton_model": str(repo)}
    record.finish(tmp_path / "run" / "export")
    proc = _serve(tmp_path, "serve.backend=triton")
    assert _stop_and_time(proc, how) < 30
