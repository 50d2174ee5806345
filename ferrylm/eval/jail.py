"""A confined worker that runs generated programs, one forked child per program.

    python -I -S -B jail.py UID CPU_S MEMORY_BYTES FILE_BYTES NPROC

Confinement is set up once per worker, then every program is a fork of the confined worker (no
interpreter start-up per program, which is what made a jail per program slow). In order: a
private mount namespace with fresh tmpfs over /tmp, /var/tmp and /dev/shm (writes outside the
program's directory vanish with the worker), a network namespace with only a downed loopback (no
network), and — when started as root — a dedicated unprivileged uid for each program, so programs can
neither read the evaluator's private files nor signal the worker or the evaluator. Without root it tries a user namespace for the same
confinement, and otherwise keeps the resource limits alone. The worker is non-dumpable, so a program
(same uid) cannot read its memory or write into its pipes through /proc.

Protocol: one JSON line in per program ({"nonce", "code", "timeout"}), one JSON line out
({"nonce", "status"}); the first line out is {"isolation": level}.
"""
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import sys
import traceback

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 1, 32, 4096, 8192, 1 << 14, 1 << 18
PR_SET_DUMPABLE = 4
_libc = ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> bool:
    return _libc.unshare(flags) == 0


def _private_mounts() -> None:
    _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    for target in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(target):
            _libc.mount(b"none", target.encode(), b"tmpfs", 0, b"size=256m,mode=1777")


def _closed_ancestor(path: str) -> str | None:
    """The first directory on the way to `path` that others may not enter (e.g. /root), if any."""
    parts = os.path.realpath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        d = os.sep.join(parts[:i])
        if not os.stat(d).st_mode & 0o001:
            return d
    return None


def _expose_stdlib() -> None:
    """Make the interpreter's install readable by the program uid, read-only, at its own path.

    Programs import modules the worker has not loaded yet, from the interpreter's prefix. Where that
    lies under a closed directory (pyenv under /root), the closed directory is covered by an empty
    tmpfs — its other contents stay hidden — and the prefix alone is mounted back in place.
    """
    prefix = os.path.realpath(sys.base_prefix)
    closed = _closed_ancestor(prefix)
    if closed is None:
        return
    hold = "/tmp/.ferrylm-python"
    os.mkdir(hold)
    _libc.mount(prefix.encode(), hold.encode(), None, MS_BIND | MS_REC, None)
    _libc.mount(b"none", closed.encode(), b"tmpfs", 0, b"mode=0755")
    os.makedirs(prefix, mode=0o755, exist_ok=True)
    _libc.mount(hold.encode(), prefix.encode(), None, MS_MOVE, None)
    _libc.mount(prefix.encode(), prefix.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None)
    os.rmdir(hold)


def confine(uid: int) -> str:
    if os.geteuid() == 0:
        if not _unshare(CLONE_NEWNS | CLONE_NEWNET):
            return "limits"
        _private_mounts()
        _expose_stdlib()
        # The worker stays root inside its namespaces; each program drops to `uid` after the fork,
        # so a program can neither signal nor inspect the worker that judges it.
        level = "namespaces+uid"
    else:
        real_uid, real_gid = os.getuid(), os.getgid()
        if not _unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET):
            return "limits"
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {real_uid} 1"),
                           ("/proc/self/gid_map", f"0 {real_gid} 1")):
            with open(path, "w") as fh:
                fh.write(text)
        _private_mounts()
        level = "namespaces"
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    return level


def _run_child(workdir: str, code: str, limits: tuple[int, int, int, int], uid: int | None) -> None:
    """In the forked child: its own group, dir, limits, uid and environment; then the program."""
    cpu_s, mem, fsize, nproc = limits
    os.setsid()
    os.chdir(workdir)
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0), os.dup2(null, 1), os.dup2(err, 2)
    os.closerange(3, 1024)  # the worker's pipes to the evaluator stay out of reach
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    os.environ.clear()
    os.environ.update(PATH="/usr/bin:/bin", HOME=workdir, TMPDIR=workdir, LANG="C.UTF-8")
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    try:
        exec(compile(code, "program.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        code_out = 0
    except SystemExit as e:
        code_out = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code_out = 1
    sys.stderr.flush()
    os._exit(code_out)


def _kill_leftovers(pgid: int, uid: int | None) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is None:
        return
    # A program may have left its group (setsid); everything running as its uid goes.
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as fh:
                    owner = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
                if owner == uid:
                    os.kill(int(name), signal.SIGKILL)
            except (OSError, StopIteration, ValueError):
                pass


def _wipe_private_tmp() -> None:
    """Nothing a program left in the worker's own /tmp reaches the next program."""
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        for name in os.listdir(d) if os.path.isdir(d) else ():
            path = os.path.join(d, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def _wait(pid: int, timeout: float) -> int | None:
    """The child's wait status, or None on timeout."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    if not ready:
        return None
    return os.waitpid(pid, 0)[1]


def run_one(request: dict, n: int, limits: tuple[int, int, int, int], uid: int | None, private_tmp: bool) -> str:
    workdir = f"/tmp/ferrylm-prog-{os.getpid()}-{n}"
    os.makedirs(workdir, mode=0o700)
    if uid is not None:
        os.chown(workdir, uid, uid)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                _run_child(workdir, request["code"], limits, uid)
            finally:
                os._exit(1)
        status = _wait(pid, float(request["timeout"]))
        _kill_leftovers(pid, uid)
        if status is None:
            os.waitpid(pid, 0)
            return "timed out"
        if os.waitstatus_to_exitcode(status) == 0:
            return "passed"
        try:
            with open(os.path.join(workdir, "stderr.txt"), errors="replace") as fh:
                lines = [ln for ln in fh.read().splitlines() if ln.strip()]
        except OSError:
            lines = []
        return f"failed: {lines[-1] if lines else f'exit code {os.waitstatus_to_exitcode(status)}'}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if private_tmp:
            _wipe_private_tmp()


def main() -> None:
    uid, cpu_s, mem, fsize, nproc = map(int, sys.argv[1:6])
    level = confine(uid)
    out = sys.stdout
    out.write(json.dumps({"isolation": level}) + "\n")
    out.flush()
    limits = (cpu_s, mem, fsize, nproc)
    for n, line in enumerate(sys.stdin):
        request = json.loads(line)
        status = run_one(request, n, limits, uid if level == "namespaces+uid" else None,
                         private_tmp=level.startswith("namespaces"))
        out.write(json.dumps({"nonce": request["nonce"], "status": status}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
