"""Launcher that confines one generated program, then execs it.

    python -I -S -B jail.py WORKDIR UID CPU_S MEMORY_BYTES FILE_BYTES NPROC

Runs as its own process (not a preexec_fn, which is unsafe in the threaded evaluator). In order:
a private mount namespace with fresh tmpfs over /tmp, /var/tmp and /dev/shm (writes outside the
work dir vanish with the program), a network namespace with only a downed loopback (no network),
resource limits, then — when started as root — a dedicated unprivileged uid, so the program can
neither read the evaluator's private files nor signal its parent. Without root it tries a user
namespace for the same confinement, and otherwise keeps the limits alone. The level reached is
the first line on stderr, so the evaluator records how contained each run was.
"""
import ctypes
import os
import resource
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 1 << 14, 1 << 18
PY_VIEW = "/tmp/.python"  # the interpreter's install, bind-mounted read-only inside the new /tmp
_libc = ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> bool:
    return _libc.unshare(flags) == 0


def _mount_tmpfs(target: str) -> None:
    if os.path.isdir(target):
        _libc.mount(b"none", target.encode(), b"tmpfs", 0, b"size=64m,mode=1777")


def _private_mounts() -> None:
    _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    for target in ("/tmp", "/var/tmp", "/dev/shm"):
        _mount_tmpfs(target)
    # The interpreter may live where the sandbox uid cannot reach (e.g. under /root): show it at
    # a path it can, read-only.
    os.mkdir(PY_VIEW, 0o755)
    src = sys.base_prefix.encode()
    _libc.mount(src, PY_VIEW.encode(), None, MS_BIND | MS_REC, None)
    _libc.mount(src, PY_VIEW.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None)


def _confine_root(uid: int) -> str:
    if not _unshare(CLONE_NEWNS | CLONE_NEWNET):
        return "limits"  # the uid could not reach the interpreter without the mount namespace
    _private_mounts()
    return "namespaces+uid"


def _confine_user() -> str:
    uid, gid = os.getuid(), os.getgid()
    if not _unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET):
        return "limits"
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                       ("/proc/self/gid_map", f"0 {gid} 1")):
        with open(path, "w") as fh:
            fh.write(text)
    _private_mounts()
    return "namespaces"


def main() -> None:
    workdir, uid, cpu_s, mem, fsize, nproc = sys.argv[1], *map(int, sys.argv[2:7])
    cwd = os.open(workdir, os.O_RDONLY)  # held open: the tmpfs over /tmp may hide its path
    level = _confine_root(uid) if os.geteuid() == 0 else _confine_user()
    os.fchdir(cwd)
    os.close(cwd)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    namespaced = level.startswith("namespaces")
    if os.geteuid() == 0 and namespaced:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)  # RLIMIT_NPROC binds from here: root is exempt, this uid is not
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    os.write(2, f"ferrylm-jail: {level}\n".encode())
    env = {"PATH": "/usr/bin:/bin", "HOME": ".", "TMPDIR": ".", "LANG": "C.UTF-8"}
    python = getattr(sys, "_base_executable", sys.executable)
    if namespaced:
        rel = os.path.relpath(os.path.realpath(python), os.path.realpath(sys.base_prefix))
        python = os.path.join(PY_VIEW, rel)
        env["LD_LIBRARY_PATH"] = os.path.join(PY_VIEW, "lib")  # ahead of a RUNPATH it cannot reach
    # -S: no site-packages, stdlib only (what the tasks may use), and a third of the start-up time.
    os.execve(python, [python, "-I", "-S", "-B", "program.py"], env)


if __name__ == "__main__":
    main()
