"""One measured trial per process: a training strategy is a real, short `ferrylm train` (or `ferrylm
launch` on several GPUs) in its own run directory; what it measured is read back from its records.

A process per trial is what lets a strategy that runs out of memory, or cannot run here, become a
row with its reason while the others still run; the parent also reads each child's peak resident
memory from the kernel (wait4), the one peak that covers every process a launcher starts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from ..config import Config, ConfigError, derive
from .rows import hand_over
from .strategies import Strategy


def run_process(cmd: list[str], log_path: Path, timeout_s: float) -> dict:
    """Run `cmd` in its own process group with its output in `log_path`; its exit code, wall time, the
    peak resident memory of it and its children, and whether it was stopped at `timeout_s`."""
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    timed_out = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout_s:
            # torchrun starts each rank in a session of its own: killing the launcher's group alone
            # left a rank holding a GPU (seen on 2 x H200), so every descendant is killed too.
            stray = _descendants(proc.pid)
            os.killpg(proc.pid, signal.SIGKILL)
            for child in stray:
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            pid, status, usage = os.wait4(proc.pid, 0)
            timed_out = True
            break
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    return {
        "returncode": proc.returncode,
        "wall_s": round(time.monotonic() - t0, 1),
        "host_rss_gib": usage.ru_maxrss / 2**20,
        "timed_out": timed_out,
    }


def _descendants(root: int) -> list[int]:
    """Every process below `root`, found through /proc (none where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def failure_reason(log_path: Path, timed_out: bool, timeout_s: float) -> str:
    """One line: the time limit, running out of memory, ferrylm's own one-line error, or the last error line."""
    if timed_out:
        return f"stopped after bench.trial_timeout_s={timeout_s:g} s"
    lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "out of memory" in ln.lower() or "OutOfMemoryError" in ln:
            return "does not fit: " + ln.split("Error: ", 1)[-1][:240]
    own = [ln for ln in lines if ln.startswith("ferrylm: error:")]
    if own:
        return own[-1].removeprefix("ferrylm: error:").strip()[:300]
    # A raised exception's own line ("[rank0]: RuntimeError: ..." under a launcher), not the
    # launcher's trailer that follows it.
    raised = [
        ln
        for ln in lines
        if re.match(r"(\[rank\d+\]: )?[\w.]*(Error|Exception)\b.*:", ln)
        and "elastic" not in ln
        and "ChildFailedError" not in ln
    ]
    errors = raised or [ln for ln in lines if "Error" in ln or "error" in ln]
    return (errors or lines or ["exited with no output"])[-1][:300]


def trial_config(cfg: Config, strategy: Strategy, trial_dir: Path) -> Config:
    b = cfg.bench
    return derive(
        cfg,
        [
            f"run_dir={trial_dir}",
            *strategy.overrides(),
            f"train.max_steps={b.warmup_steps + b.steps}",
            "train.epochs=null",  # a trial's steps are the bench's, whatever passes the run asks for
            "train.logging_steps=1",
            "train.save_steps=0",
            "train.eval_batches=1",
            "train.report_to=[]",
            "train.resume=false",
            "train.keep_best=false",
            "train.save_final=false",
        ],
    )  # a trial keeps its numbers, not a 15 GB model


def train_trial(cfg: Config, strategy: Strategy, trial_dir: Path, rows: dict, gpus: int) -> dict:
    """The strategy's row: tokens/s (median of the timed steps' log lines), peak memory, the loss after
    the timed steps, the planner's prediction; or its reason for failing."""
    row = {"strategy": strategy.name, "what": strategy.what, "gpus": gpus if strategy.needs == "gpus" else 1}
    shutil.rmtree(trial_dir, ignore_errors=True)
    trial_dir.mkdir(parents=True)
    try:
        tcfg = trial_config(cfg, strategy, trial_dir)
    except ConfigError as e:
        return {**row, "status": "failed", "reason": str(e)}
    hand_over(rows, trial_dir)
    config_path = trial_dir / "config.yaml"
    config_path.write_text(yaml.safe_dump(tcfg.model_dump(mode="json"), sort_keys=False))
    cmd = (
        [sys.executable, "-m", "ferrylm", "launch", "--nproc", str(gpus), "--config", str(config_path)]
        if strategy.needs == "gpus"
        else [sys.executable, "-m", "ferrylm", "train", "--config", str(config_path)]
    )
    proc = run_process(cmd, trial_dir / "log.txt", cfg.bench.trial_timeout_s)
    row.update(wall_s=proc["wall_s"], host_rss_gib=proc["host_rss_gib"])
    row.update(_measured(trial_dir / "train", cfg.bench.warmup_steps))
    if proc["returncode"] != 0:
        row.update(
            status="failed", reason=failure_reason(trial_dir / "log.txt", proc["timed_out"], cfg.bench.trial_timeout_s)
        )
    else:
        row["status"] = "ok"
    return row


def _measured(train_dir: Path, warmup: int) -> dict:
    """What the run logged (kept also when it failed later, e.g. while saving) and its record's metrics."""
    history = train_dir / "log_history.jsonl"
    lines = [json.loads(ln) for ln in history.read_text().splitlines() if ln.strip()] if history.is_file() else []
    timed = [ln for ln in lines if "tokens_per_s" in ln and ln["step"] > warmup]
    out: dict = {}
    if timed:
        out["tokens_per_s"] = statistics.median(ln["tokens_per_s"] for ln in timed)
        out["steps_timed"] = len(timed)
        out["loss"] = timed[-1]["loss"]
        if all("mfu" in ln for ln in timed):
            out["mfu"] = statistics.median(ln["mfu"] for ln in timed)
    record = train_dir / "record.json"
    if record.is_file():
        m = json.loads(record.read_text())["metrics"]
        out.update(
            loss=m["final_train_loss"],
            peak_allocated_gib=m["peak_gpu_memory_gib"],
            peak_reserved_gib=m.get("peak_gpu_reserved_gib"),
            precision=m["precision"],
            world_size=m["world_size"],
            # The planner models bf16 training; its figure for an fp32 or fp16 run would mislead.
            planned_gib=m["planned_peak_gib"] if m["precision"] == "bf16" else None,
        )
        if out.get("tokens_per_s") is not None and m["peak_gpu_memory_gib"] is not None:
            out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / m["world_size"]
    return out


def decode_trial(target, prompt_ids: list[int], tokens: int, trial_dir: Path, timeout_s: float) -> dict:
    """The artifact's decoding row: time to first token, total time and ms/token for `tokens` new
    tokens, peak memory; or its reason for failing."""
    row = {"artifact": target.name, "what": target.what}
    trial_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "kind": target.kind,
        "path": target.path,
        "options": target.options,
        "prompt_ids": prompt_ids,
        "tokens": tokens,
    }
    log = trial_dir / "log.txt"
    proc = run_process([sys.executable, "-m", "ferrylm.bench.decode", json.dumps(spec)], log, timeout_s)
    row.update(wall_s=proc["wall_s"], host_rss_gib=proc["host_rss_gib"])
    if proc["returncode"] != 0:
        return {**row, "status": "failed", "reason": failure_reason(log, proc["timed_out"], timeout_s)}
    last = [ln for ln in log.read_text().splitlines() if ln.startswith("{")][-1]
    return {**row, **json.loads(last), "status": "ok"}
