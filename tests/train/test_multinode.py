"""Two nodes on one machine: two `ferrylm launch` agents of one process each meet at a c10d rendezvous
on the loopback address (gloo, the tiny model). Their losses are one agent of two processes' losses;
one agent killed mid-run stops the other within seconds with one line naming the last complete
checkpoint, and launching both again resumes from it to the uninterrupted run's losses."""

import json
import re
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ferrylm.serve import free_port
from tests.train.two_processes import overrides

STEPS = 24


def _overrides(run, tiny_qwen2_dir, tiny_corpus) -> list[str]:
    return overrides(run, tiny_qwen2_dir, tiny_corpus, STEPS, 4)


def _agents(overrides: list[str], logs) -> list[subprocess.Popen]:
    """Node 0 and node 1, each writing to its own log (a pipe nobody reads would stall them)."""
    rdzv = f"127.0.0.1:{free_port()}"
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ferrylm",
                "launch",
                "--nproc",
                "1",
                "--nnodes",
                "2",
                "--node-rank",
                str(k),
                "--rdzv",
                rdzv,
                *overrides,
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(logs / f"node{k}.log", "w"),
        )
        for k in (0, 1)
    ]


def _said(logs, k: int) -> str:
    return (logs / f"node{k}.log").read_text()


def _finish(agents: list[subprocess.Popen], logs, timeout: float = 600) -> None:
    for a in agents:
        a.wait(timeout=timeout)
    assert [a.returncode for a in agents] == [0, 0], _said(logs, 0)[-3000:] + _said(logs, 1)[-3000:]


def _losses(run) -> dict[int, float]:
    history = [json.loads(line) for line in (run / "train" / "log_history.jsonl").read_text().splitlines()]
    return {h["step"]: h["loss"] for h in history if "loss" in h and "eval_loss" not in h}


def _kill_node(agent: subprocess.Popen) -> None:
    """A node lost: its agent, torchrun and the worker, all at once."""
    procs = [psutil.Process(agent.pid), *psutil.Process(agent.pid).children(recursive=True)]
    for p in procs:
        p.send_signal(signal.SIGKILL)


@pytest.mark.slow
def test_two_nodes_match_one_and_a_lost_node_resumes(tiny_data_run, tiny_qwen2_dir, tiny_corpus, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for run in (one, two):
        shutil.copytree(tiny_data_run, run)
    reference = subprocess.run(
        [sys.executable, "-m", "ferrylm", "launch", "--nproc", "2", *_overrides(one, tiny_qwen2_dir, tiny_corpus)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert reference.returncode == 0, reference.stderr[-3000:]
    expected = _losses(one)
    assert sorted(expected) == list(range(1, STEPS + 1))

    first, again = tmp_path / "first", tmp_path / "again"
    first.mkdir(), again.mkdir()
    agents = _agents(_overrides(two, tiny_qwen2_dir, tiny_corpus), first)
    marker = two / "train" / "checkpoints" / "checkpoint-4" / "COMPLETE"
    deadline = time.monotonic() + 300
    while not marker.is_file():
        assert time.monotonic() < deadline and agents[0].poll() is None, "the two agents never wrote checkpoint-4"
        time.sleep(0.1)
    _kill_node(agents[1])
    lost_at = time.monotonic()
    agents[0].wait(timeout=120)
    assert agents[0].returncode != 0 and time.monotonic() - lost_at < 60
    survivor = _said(first, 0)
    said = [line for line in survivor.splitlines() if line.startswith("ferrylm: ")]
    assert said and said[-1].startswith("ferrylm: a node of the run was lost"), survivor[-3000:]
    last = re.search(r"the last complete checkpoint is (\S+): launch again", said[-1]).group(1)
    assert (two / "train" / "checkpoints").as_posix() in last and (tmp_path / last / "COMPLETE").is_file()

    _finish(_agents(_overrides(two, tiny_qwen2_dir, tiny_corpus), again), again)  # both nodes again: resumed
    metrics = json.loads((two / "train" / "record.json").read_text())["metrics"]
    assert metrics["world_size"] == 2 and metrics["steps"] == STEPS
    resumed = int(last.rsplit("-", 1)[1])
    got = _losses(two)
    # two nodes of one process are one node of two, step for step: before the loss (the first launch's
    # steps, kept in the log) and after it (the relaunched nodes' steps from the checkpoint on)
    assert resumed >= 4 and sorted(got) == list(range(1, STEPS + 1))
    assert got == pytest.approx(expected, abs=1e-6)
