"""The agents of a multi-node run watch each other through the rendezvous's store (a real TCPStore on
the loopback address, a made-up clock): a silent peer is lost after the bound, a finished one is not,
a failed one stops the rest at once, and a lost peer stops this node's torchrun session."""

import subprocess
import sys
import time

from torch.distributed import TCPStore

from ferrylm.serve import free_port
from ferrylm.train.launch import PeerWatch


def _pair(lost_after_s: float, beat_s: float = 2.0) -> tuple[TCPStore, PeerWatch, PeerWatch]:
    port = free_port()
    server = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
    a, b = (PeerWatch(f"127.0.0.1:{port}", 2, lost_after_s, beat_s) for _ in range(2))
    assert a.connect() and b.connect() and {a.me, b.me} == {0, 1}
    return server, a, b


def test_a_silent_peer_is_lost_after_the_bound_and_not_before():
    server, a, b = _pair(lost_after_s=5)
    for t in range(10):
        assert a.beat(t) is None and b.beat(t) is None
    assert a.beat(10) is None  # b's last beat (t=9) seen moving here
    for t in range(11, 16):
        assert a.beat(t) is None, t  # silent for at most 5 s
    assert a.beat(16) == f"node agent {b.me} stopped beating for 6 s"


def test_a_finished_peer_is_never_lost_and_a_failed_one_is_at_once():
    server, a, b = _pair(lost_after_s=5)
    a.beat(0), b.beat(0), a.beat(1)
    b.done(0)
    assert a.beat(100) is None
    server, a, b = _pair(lost_after_s=5)
    a.beat(0), b.beat(0)
    b.done(1)
    assert a.beat(1) == f"training failed on node agent {b.me}"


def test_a_lost_peer_stops_this_nodes_session():
    server, a, b = _pair(lost_after_s=0.5, beat_s=0.1)
    b.beat(time.monotonic())  # b beats once, then its node is gone
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    start = time.monotonic()
    a.watch(proc)
    assert proc.poll() is not None and time.monotonic() - start < 10
    assert a.lost.startswith(f"node agent {b.me} stopped beating")
    alive = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
    states = [
        subprocess.run(["ps", "-o", "stat=", "-p", pid], capture_output=True, text=True).stdout.strip() for pid in alive
    ]
    assert all(s.startswith("Z") or not s for s in states), states  # the grandchild went too (or waits to be reaped)


def test_a_killed_builds_lock_is_named_instead_of_waited_on_forever(tmp_path, monkeypatch):
    """torch's JIT builder waits on an op build's lock without end; a lock older than any build is refused by name,
    a fresh one (a build running now) is left to torch."""
    import os
    import time

    import pytest

    from ferrylm.train.launch import STALE_LOCK_S, StaleBuildLock, prepare_distributed_env, refuse_stale_build_locks

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    lock = tmp_path / "py311_cpu" / "deepspeed_shm_comm" / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    refuse_stale_build_locks()  # a build running now
    old = time.time() - STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    with pytest.raises(StaleBuildLock, match="deepspeed_shm_comm/lock: an op build's lock left 31 minutes ago"):
        prepare_distributed_env(use_deepspeed=True, has_cuda=False)
    prepare_distributed_env(use_deepspeed=False, has_cuda=False)  # no DeepSpeed: no op is built
    lock.unlink()
    refuse_stale_build_locks()
