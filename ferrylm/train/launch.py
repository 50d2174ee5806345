"""One config, three ways to launch training: one node with several processes, several nodes
(torchrun's c10d rendezvous), or a SLURM batch script that does the latter on the allocation; and
the process-group environment a single process needs (prepare_distributed_env).

    ferrylm launch --nproc 2 --config run.yaml train.deepspeed=zero2
    ferrylm launch --nproc 8 --nnodes 4 --node-rank 0 --rdzv node0:29500 --config run.yaml
    ferrylm launch --nproc 8 --nnodes 4 --slurm train.sbatch --config run.yaml   # then: sbatch train.sbatch
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..errors import FerryError
from ..log import get_logger

log = get_logger("train")


def torchrun_command(
    nproc: int,
    config: str | None,
    overrides: list[str],
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv: str | None = None,
    run_id: str = "ferrylm",
    python: str | None = None,
) -> list[str]:
    cmd = [python or sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    if nnodes == 1:
        cmd.append("--standalone")  # a local rendezvous on a free port
    else:
        if not rdzv:
            raise ValueError("launch: --nnodes > 1 needs --rdzv HOST:PORT (the rendezvous every node reaches)")
        cmd += [
            f"--nnodes={nnodes}",
            f"--node_rank={node_rank}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={rdzv}",
            f"--rdzv_id={run_id}",
        ]
    cmd += ["-m", "ferrylm", "train"]
    if config:
        cmd += ["--config", config]
    return cmd + list(overrides)


def sbatch_script(
    nproc: int,
    nnodes: int,
    config: str | None,
    overrides: list[str],
    job_name: str = "ferrylm",
    time_limit: str = "24:00:00",
    cpus_per_task: int = 16,
    port: int = 29500,
    workdir: str = ".",
    python: str | None = None,
    gpus: bool = True,
) -> str:
    """A SLURM script: one task per node, each running torchrun for that node's GPUs (`gpus=False`:
    processes on its CPUs, gloo); the first node of the allocation hosts the rendezvous."""
    if nnodes == 1:
        cmd = torchrun_command(nproc, config, overrides, python=python)
    else:
        # c10d rendezvous hands out node ranks itself, so every task runs the same line.
        cmd = [
            c
            for c in torchrun_command(
                nproc, config, overrides, nnodes=nnodes, rdzv=f"$HEAD:{port}", run_id="$SLURM_JOB_ID", python=python
            )
            if not c.startswith("--node_rank")
        ]
    line = " ".join(f'"{c}"' if "$" in c else shlex.quote(c) for c in cmd)
    return f"""#!/bin/bash
# Written by `ferrylm launch --slurm`. Submit with: sbatch THIS_FILE
#SBATCH --job-name={job_name}
#SBATCH --nodes={nnodes}
#SBATCH --ntasks-per-node=1
{f"#SBATCH --gpus-per-node={nproc}" if gpus else "# no GPUs asked: the processes run on the CPUs"}
#SBATCH --cpus-per-task={cpus_per_task}
#SBATCH --time={time_limit}
#SBATCH --output=%x-%j.out
set -euo pipefail
cd {shlex.quote(workdir)}
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export OMP_NUM_THREADS=$((SLURM_CPUS_PER_TASK / {nproc} > 0 ? SLURM_CPUS_PER_TASK / {nproc} : 1))
srun --kill-on-bad-exit=1 {line}
"""


# what a worker says when a peer on another node went away (gloo; NCCL with its watchdog)
_LOST = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote process exited",
    "NCCL communicator was aborted",
    "ProcessGroupNCCL's watchdog",
    "RendezvousConnectionError",
)  # torchrun's own agent, when the node hosting the rendezvous went away


class PeerWatch:
    """The agents of a multi-node run beat in the rendezvous's own store (torchrun hosts it at --rdzv):
    a peer whose count stops moving, or a store that stops answering, for `lost_after_s` is a lost
    node. NCCL between nodes that share a host never notices a dead peer until its timeout (minutes);
    the agents, not the workers, beat, so a long checkpoint save on one rank is no silence."""

    def __init__(self, rdzv: str, nnodes: int, lost_after_s: float = 30.0, beat_s: float = 2.0):
        self.host, port = rdzv.rsplit(":", 1)
        self.port, self.nnodes, self.lost_after_s, self.beat_s = int(port), nnodes, lost_after_s, beat_s
        self.store, self.me, self.lost = None, None, None  # lost: what was lost, once it is
        self._seen: dict[int, tuple[int, float]] = {}  # peer -> (its count, when it last moved)
        self._quiet_since: float | None = None  # the store's first failure in a row

    def connect(self) -> bool:
        from datetime import timedelta

        from torch.distributed import TCPStore

        try:
            self.store = TCPStore(
                self.host, self.port, is_master=False, timeout=timedelta(seconds=5), wait_for_workers=False
            )
        except (RuntimeError, TimeoutError, ValueError):
            return False  # the rendezvous is not up yet
        self.me = self.store.add("ferrylm/agents", 1) - 1
        return True

    def beat(self, now: float) -> str | None:
        """One beat; returns what was lost once a peer or the store has been silent too long."""
        try:
            self.store.add(f"ferrylm/beat/{self.me}", 1)
            for peer in (j for j in range(self.nnodes) if j != self.me):
                if self.store.add(f"ferrylm/failed/{peer}", 0):
                    self.lost = f"training failed on node agent {peer}"
                if self.store.add(f"ferrylm/done/{peer}", 0):
                    continue  # finished and said so
                count = self.store.add(f"ferrylm/beat/{peer}", 0)
                last = self._seen.get(peer)
                if count and (last is None or last[0] != count):
                    self._seen[peer] = (count, now)
                elif last and now - last[1] > self.lost_after_s:
                    self.lost = f"node agent {peer} stopped beating for {now - last[1]:.0f} s"
            self._quiet_since = None
        except (RuntimeError, TimeoutError, ValueError):
            self._quiet_since = self._quiet_since or now
            if now - self._quiet_since > self.lost_after_s:
                self.lost = f"the rendezvous at {self.host}:{self.port} stopped answering"
        return self.lost

    def done(self, code: int) -> None:
        """Tell the peers this node finished (0) or failed (they stop at once instead of after the silence)."""
        try:
            self.store.add(f"ferrylm/{'failed' if code else 'done'}/{self.me}", 1)
        except (RuntimeError, TimeoutError, ValueError, AttributeError):
            pass

    def watch(self, proc: subprocess.Popen) -> None:
        """Beat until `proc` ends; when a peer is lost, stop `proc`'s whole session (torchrun and its workers)."""
        while proc.poll() is None and not (self.store or self.connect()):
            time.sleep(self.beat_s)
        while proc.poll() is None and not self.beat(time.monotonic()):
            time.sleep(self.beat_s)
        if self.lost and proc.poll() is None:
            _stop_session(proc)


def _stop_session(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM to torchrun and its workers; after `grace_s`, or once torchrun is gone, SIGKILL to what is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a worker stuck in a collective ignores the first
    except ProcessLookupError:
        pass
    proc.wait()


def run_node(cmd: list[str], checkpoints: Path, rdzv: str, nnodes: int, lost_after_s: float = 30.0) -> int:
    """torchrun for one node of several, as a child in its own session: its output passed through,
    SIGINT/SIGTERM passed on, its peers watched (PeerWatch), and when it stops with an error one line
    saying whether a node was lost and which complete checkpoint the run resumes from when launched
    again (torchrun itself would only print its workers' tracebacks, or wait out NCCL's timeout)."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1, start_new_session=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: proc.send_signal(signum))
    if "torch" not in sys.modules:  # this process's store client only: its C++ warnings when a peer leaves
        os.environ["TORCH_CPP_LOG_LEVEL"] = "ERROR"
    peers = PeerWatch(rdzv, nnodes, lost_after_s)
    watcher = threading.Thread(target=peers.watch, args=(proc,), daemon=True)
    watcher.start()
    lost = False
    for line in proc.stderr:
        sys.stderr.write(line)
        lost = lost or any(m in line for m in _LOST)
    code = proc.wait()
    peers.done(code)
    if code:
        from .checkpoints import latest_complete

        last = latest_complete(checkpoints)
        what = (
            f"a node of the run was lost ({peers.lost})"
            if peers.lost
            else "a node of the run was lost"
            if lost
            else "training stopped with an error on this node"
        )
        print(
            f"ferrylm: {what} (torchrun exit {code}); the last complete checkpoint is "
            f"{last or 'none yet'}: launch again on every node to resume from it",
            file=sys.stderr,
            flush=True,
        )
    return code


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# An op's build takes a minute or two; a lock older than this was left by a build killed midway.
STALE_LOCK_S = 1800


class StaleBuildLock(FerryError, RuntimeError):
    """A killed build's lock file that every later DeepSpeed run here would wait on forever."""


def refuse_stale_build_locks(now: float | None = None) -> None:
    """DeepSpeed builds its ops with torch's JIT builder, which waits on a build's lock file without end (a
    killed build leaves it, and every later run hangs silently at its start): name the file instead."""
    from torch.utils.cpp_extension import get_default_build_root

    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
    now = time.time() if now is None else now
    for lock in sorted([*root.glob("*/lock"), *root.glob("*/*/lock")]):
        age = now - lock.stat().st_mtime
        if age > STALE_LOCK_S:
            raise StaleBuildLock(
                f"{lock}: an op build's lock left {age / 60:.0f} minutes ago (a build killed midway); every DeepSpeed "
                "run here would wait on it forever: remove it when no other run is building"
            )


def prepare_distributed_env(use_deepspeed: bool, has_cuda: bool, sharded: bool = False) -> None:
    """`sharded`: FSDP2, which like DeepSpeed needs a process group even for a world of one."""
    if use_deepspeed:
        refuse_stale_build_locks()
    if use_deepspeed and not has_cuda:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    if use_deepspeed and re.search(r"\d\.\d[a-z]", arch):
        # DeepSpeed's op builder reads "9.0a" as a number and fails; the plain arch builds the same ops.
        os.environ["TORCH_CUDA_ARCH_LIST"] = re.sub(r"(\d\.\d)[a-z]", r"\1", arch)
    import torch

    gpus = torch.cuda.device_count() if has_cuda else 0
    several_gpus = gpus > 1
    if several_gpus and "RANK" not in os.environ:
        # One process on a machine with several GPUs: the Trainer would wrap the model in
        # nn.DataParallel (one process driving every GPU, the loss summed across them). Train on
        # one GPU instead, as a world of one, and say how to use them all.
        log.warning(
            "%d GPUs visible but one process: training on GPU 0; use `ferrylm launch --nproc %d` for all", gpus, gpus
        )
    if (use_deepspeed or sharded or several_gpus) and "RANK" not in os.environ:
        # A single process still needs a process group for DeepSpeed; launchers set these themselves.
        os.environ.update(
            RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port())
        )
