"""One config, three ways to launch training: one node with several processes, several nodes
(torchrun's c10d rendezvous), or a SLURM batch script that does the latter on the allocation.

    ferrylm launch --nproc 2 --config run.yaml train.deepspeed=zero2
    ferrylm launch --nproc 8 --nnodes 4 --node-rank 0 --rdzv node0:29500 --config run.yaml
    ferrylm launch --nproc 8 --nnodes 4 --slurm train.sbatch --config run.yaml   # then: sbatch train.sbatch
"""
from __future__ import annotations

import shlex
import sys


def torchrun_command(nproc: int, config: str | None, overrides: list[str], nnodes: int = 1, node_rank: int = 0,
                     rdzv: str | None = None, run_id: str = "ferrylm", python: str | None = None) -> list[str]:
    cmd = [python or sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    if nnodes == 1:
        cmd.append("--standalone")   # a local rendezvous on a free port
    else:
        if not rdzv:
            raise ValueError("launch: --nnodes > 1 needs --rdzv HOST:PORT (the rendezvous every node reaches)")
        cmd += [f"--nnodes={nnodes}", f"--node_rank={node_rank}", "--rdzv_backend=c10d", f"--rdzv_endpoint={rdzv}",
                f"--rdzv_id={run_id}"]
    cmd += ["-m", "ferrylm", "train"]
    if config:
        cmd += ["--config", config]
    return cmd + list(overrides)


def sbatch_script(nproc: int, nnodes: int, config: str | None, overrides: list[str], job_name: str = "ferrylm",
                  time_limit: str = "24:00:00", cpus_per_task: int = 16, port: int = 29500, workdir: str = ".",
                  python: str | None = None) -> str:
    """A SLURM script: one task per node, each running torchrun for that node's GPUs; the first
    node of the allocation hosts the rendezvous."""
    if nnodes == 1:
        cmd = torchrun_command(nproc, config, overrides, python=python)
    else:
        # c10d rendezvous hands out node ranks itself, so every task runs the same line.
        cmd = [c for c in torchrun_command(nproc, config, overrides, nnodes=nnodes, rdzv=f"$HEAD:{port}",
                                           run_id="$SLURM_JOB_ID", python=python) if not c.startswith("--node_rank")]
    line = " ".join(f'"{c}"' if "$" in c else shlex.quote(c) for c in cmd)
    return f"""#!/bin/bash
# Written by `ferrylm launch --slurm`. Submit with: sbatch THIS_FILE
#SBATCH --job-name={job_name}
#SBATCH --nodes={nnodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={nproc}
#SBATCH --cpus-per-task={cpus_per_task}
#SBATCH --time={time_limit}
#SBATCH --output=%x-%j.out
set -euo pipefail
cd {shlex.quote(workdir)}
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export OMP_NUM_THREADS=$((SLURM_CPUS_PER_TASK / {nproc} > 0 ? SLURM_CPUS_PER_TASK / {nproc} : 1))
srun --kill-on-bad-exit=1 {line}
"""
