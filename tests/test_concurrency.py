"""Runs cannot corrupt each other: one writer per stage directory, outputs published before their
record, a shared model cache built once, and a killed stage that leaves nothing a later stage uses."""

import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from ferrylm.manifest import StageBusy, read_record
from ferrylm.models import build_once, cache_root

from .conftest import tiny_config


def _as_foreground() -> None:
    # A suite started in the background by a non-interactive shell inherits SIGINT ignored, and
    # Python keeps it so: the child must take Ctrl-C as a terminal's foreground process does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ferrylm(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ferrylm", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=_as_foreground,
    )


def _overrides(run_dir, model_dir, corpus) -> list[str]:
    """The command-line twin of tiny_config's data settings."""
    return [
        f"run_dir={run_dir}",
        f"model.path={model_dir}",
        f"data.sources=[{corpus}]",
        "data.max_pairs=200",
        "data.max_seq_len=256",
        "data.eval_fraction=0.3",
        "data.workers=1",
    ]


def _wait_for(predicate, timeout=120.0, proc=None):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc is None or proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.integration
def test_a_second_writer_is_refused_with_the_holders_name(tmp_path, tiny_qwen2_dir, tiny_corpus):
    from ferrylm.data import run_data

    run = tmp_path / "run"
    first = _ferrylm("data", *_overrides(run, tiny_qwen2_dir, tiny_corpus))
    lock = run / ".data.lock"
    _wait_for(lambda: lock.is_file() and f"pid {first.pid}" in lock.read_text(), proc=first)
    with pytest.raises(StageBusy, match=rf"is being written by `ferrylm data` \(pid {first.pid} "):
        run_data(tiny_config(run, tiny_qwen2_dir, tiny_corpus, "data.workers=1"))
    assert first.wait(300) == 0, first.communicate()
    # The record that survived describes the rows that are there.
    record = read_record(run / "data")
    from datasets import Dataset

    rows = Dataset.from_file(record["outputs"]["train"])
    assert len(rows) == record["metrics"]["train_examples"]
    assert not list((run / "data").glob(".*.tmp"))


@pytest.mark.integration
@pytest.mark.parametrize("when", ["locked", "tokenizing"])
def test_an_interrupted_data_stage_leaves_nothing_the_train_stage_uses(tmp_path, tiny_qwen2_dir, tiny_corpus, when):
    from ferrylm.data import run_data
    from ferrylm.train import run_train

    run = tmp_path / "run"
    cfg = tiny_config(run, tiny_qwen2_dir, tiny_corpus, "data.workers=1")
    run_data(cfg)  # a finished run ...
    # ... then a re-run, killed while its rows are open. It scans a whole standard library: with the
    # tiny corpus that window was shorter than one scheduling delay of this test on a loaded 2-core
    # machine, and the run had finished before the signal was sent.
    stdlib = sysconfig.get_paths()["stdlib"]
    proc = _ferrylm("data", *_overrides(run, tiny_qwen2_dir, stdlib))
    data = run / "data"
    if when == "locked":
        _wait_for(lambda: f"pid {proc.pid}" in (run / ".data.lock").read_text(), proc=proc)
    else:
        _wait_for(lambda: any(data.glob(".train.arrow.*.tmp")), proc=proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    # The CLI returns 130; CPython may still end the process by SIGINT itself when the interrupt went
    # through one of its own paths (seen once in CI). A shell reads both as "interrupted"; the line
    # says the CLI took the interrupt rather than dying before its handler was installed.
    assert proc.returncode in (130, -signal.SIGINT) and "ferrylm: interrupted" in err, (proc.returncode, err)
    assert not (data / "record.json").exists()  # the old record was withdrawn when the re-run began
    assert not list(data.glob(".*.tmp"))
    with pytest.raises(FileNotFoundError, match="record.json is missing"):
        run_train(cfg)
    run_data(cfg)
    assert read_record(data)["metrics"]["train_examples"] > 0


def test_outputs_newer_than_their_record_are_refused(tmp_path):
    from ferrylm.manifest import StageRecord, StaleOutputs

    out = tmp_path / "data"
    out.mkdir()
    (out / "train.arrow").write_text("rows")
    rec = StageRecord("data", "x", outputs={"train": str(out / "train.arrow")})
    rec.finish(out)
    assert read_record(out)["outputs"]["train"] == str(out / "train.arrow")
    later = time.time() + 60
    os.utime(out / "train.arrow", (later, later))
    with pytest.raises(StaleOutputs, match="newer than"):
        read_record(out)


_BUILD = """
import sys, time
from pathlib import Path
from ferrylm.models import build_once
def build(tmp):
    (tmp / "weights.bin").write_bytes(b"w" * 1_000_000)
    time.sleep(2)
    (tmp / "config.json").write_text(sys.argv[2])
print(build_once(Path(sys.argv[1]), build))
"""


def test_concurrent_first_time_builds_share_one_result(tmp_path):
    target = tmp_path / "cache" / "model"
    (tmp_path / "cache").mkdir()
    leftover = tmp_path / "cache" / "model.tmp_killed"
    leftover.mkdir()
    (leftover / "half.bin").write_bytes(b"x")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILD, str(target), name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert {o.strip() for o, _ in outs} == {str(target)}
    assert (target / "config.json").read_text() in ("a", "b")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["model", "model.lock"]


def test_a_killed_build_leaves_nothing_and_the_next_one_completes(tmp_path):
    target = tmp_path / "model"

    def boom(tmp):
        (tmp / "partial").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_once(target, boom)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.lock"]
    assert build_once(target, lambda tmp: (tmp / "config.json").write_text("{}")) == target


def test_the_model_cache_is_the_users(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "ferrylm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "ferrylm"
    assert cache_root("/somewhere") == Path("/somewhere")
