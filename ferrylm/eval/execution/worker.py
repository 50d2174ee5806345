"""The worker inside the sandbox: runs generated programs, one forked child per program.

    bwrap ... python -I -S -B -c "<this file>" CPU_S MEMORY_BYTES FILE_BYTES NPROC UID SANDBOXED

sandbox.py starts it inside bubblewrap (its own root, pid, network, IPC and UTS namespaces, a clean
environment, nothing of the host but the interpreter read-only), so this file holds no namespace
code of its own: only what happens per program. Interpreter start-up happens once per worker; each
program is a fork of it, with a fresh directory, resource limits and (when UID is not -1) its own
unprivileged uid, so it can neither read the worker's files nor signal it.

A program passes only when the harness writes the run's token on fd 3 after the program's last
statement returned: exiting early with status 0 (`sys.exit(0)`, `raise SystemExit`, `os._exit(0)`,
a signal) leaves no token and fails with its reason. The token guards against early exits, not
against code that sets out to read the harness's memory; containing such code is the sandbox's job.

Protocol: one JSON line in per program ({"nonce", "code", "timeout"}), one JSON line out
({"nonce", "status"}); the first line out is {"ready": true}. `code` is Python source, or for a
compiled language {"files": {name: text}, "steps": [argv, ...]}: the steps (compile, then run) share
the program's directory, limits and uid, and the last one's harness writes the token itself.
"""

import fcntl
import json
import os
import re
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

_TOKEN_FD = 3
_EARLY = "exited before the tests finished"


def _run_child(workdir, code, limits, uid, token_w, token):
    """In the forked child: its own group, dir, limits, uid; then the program, then the token."""
    cpu_s, mem, fsize, nproc = limits
    os.setsid()
    os.chdir(workdir)
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0), os.dup2(null, 1), os.dup2(err, 2), os.dup2(token_w, _TOKEN_FD)
    os.closerange(_TOKEN_FD + 1, 1024)  # the worker's pipes to the evaluator stay out of reach
    for kind, value in (
        (resource.RLIMIT_CPU, (cpu_s, cpu_s + 1)),
        (resource.RLIMIT_AS, (mem, mem)),
        (resource.RLIMIT_FSIZE, (fsize, fsize)),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_NOFILE, (256, 256)),
        (resource.RLIMIT_NPROC, (nproc, nproc)),
    ):
        resource.setrlimit(kind, value)
    if uid >= 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    os.environ.clear()
    os.environ.update(PATH="/usr/bin:/bin", HOME=workdir, TMPDIR=workdir, LANG="C.UTF-8")
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    if isinstance(code, dict):
        _run_steps(code["files"], code["steps"], token)
    try:
        exec(compile(code, "program.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as e:
        print(f"{_EARLY} (SystemExit: {e.code!r})", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stderr.flush()
    try:
        os.write(_TOKEN_FD, token)
    except OSError:
        os._exit(1)  # the program closed the harness's channel
    os._exit(0)


def _run_steps(files, steps, token):
    """A compiled program: write its files, run each step (compile, ..., run) under the same limits
    and uid. Only the last step gets the token, as FERRY_TOKEN, for its harness to write on fd 3
    once its last test returned; a step that fails stops the program with its reason."""
    for name, text in files.items():
        with open(os.path.basename(name), "w") as fh:
            fh.write(text)
    for i, argv in enumerate(steps):
        last = i == len(steps) - 1
        env = dict(os.environ, FERRY_TOKEN=token.decode()) if last else dict(os.environ)
        pid = os.fork()
        if pid == 0:
            try:
                if not last:
                    os.close(_TOKEN_FD)
                    out = os.open("step.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    os.dup2(out, 1), os.dup2(out, 2)  # a compiler's messages, wherever it writes them
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        status = os.waitpid(pid, 0)[1]
        if status != 0:
            what = "compile" if not last else "run"
            tool = _tool(argv)
            code = (
                f"signal {signal.Signals(os.WTERMSIG(status)).name}"
                if os.WIFSIGNALED(status)
                else f"exit code {os.WEXITSTATUS(status)}"
            )
            # the compiler's own word for it; a last step may leave its own in reason.txt
            said = _first_error("step.txt" if not last else "reason.txt")[:300]
            print(f"{what} step {os.path.basename(tool)} failed ({code}){': ' + said if said else ''}", file=sys.stderr)
            sys.stderr.flush()
            if last and os.WIFSIGNALED(status):
                os.kill(os.getpid(), os.WTERMSIG(status))  # the program's own signal is the verdict
            os._exit(1)  # a compiler's crash is said as one, with its last word (LLVM's "out of memory")
    os._exit(0)


def _tool(argv):
    """The program a step runs, past `env` and its settings (VAR=..., -C DIR)."""
    args = iter(argv)
    for a in args:
        if a in ("-C", "--chdir"):
            next(args, None)
        elif "=" not in a and os.path.basename(a) != "env":
            return a
    return argv[0]


def _kill_leftovers(pid: int, sandboxed: bool) -> None:
    """Everything in the sandbox's pid namespace but its init (bwrap) and this worker goes: programs
    that left their group (setsid) or forked away included. Unconfined, only the program's group."""
    if not sandboxed:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        return
    # One pass over /proc lost to a fork bomb: its survivors forked between the listing and the kills (59
    # left in a fresh clone's run). kill(-1) signals every process of the namespace but init and the caller
    # while the kernel holds its process table, so no fork gets past it; it repeats while any still live.
    with open("/proc/1/comm") as f:  # never outside bwrap's pid namespace: -1 would be the host's
        inside = f.read().strip() == "bwrap"
    for _ in range(100):
        alive = _alive_besides_me()
        if not alive:
            return
        for pid in [-1] if inside else alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def _alive_besides_me() -> list[int]:
    """The namespace's processes other than its init and this worker, zombies left out."""
    me, alive = os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me):
            try:
                with open(f"/proc/{name}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        alive.append(int(name))
            except (OSError, IndexError):
                pass
    return alive


def _wipe_tmp() -> None:
    """Nothing a program left in the sandbox's /tmp or /dev/shm reaches the next program."""
    for d in ("/tmp", "/dev/shm"):
        for name in os.listdir(d) if os.path.isdir(d) else ():
            path = os.path.join(d, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass


def _wait(pid: int, timeout: float):
    """The child's wait status, or None on timeout."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return os.waitpid(pid, 0)[1] if ready else None


def _first_error(path: str) -> str:
    """A compiler's first error line (one that says "error", or Go's `file.go:LINE:COL: message`),
    else its last line."""
    try:
        with open(path, "rb") as fh:
            lines = [ln.strip() for ln in fh.read(1 << 20).decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    said = (ln for ln in lines if "error" in ln.lower() or re.match(r"\S+\.\w+:\d+:\d+: ", ln))
    return next(said, lines[-1] if lines else "")


def _last_stderr_line(workdir: str) -> str:
    try:
        fd = os.open(os.path.join(workdir, "stderr.txt"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        fh.seek(max(0, os.fstat(fd).st_size - 65536))
        lines = [ln for ln in fh.read().decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:500] if lines else ""


def _verdict(status, token_seen: bool, workdir: str) -> str:
    if status is None:
        return "timed out"
    if token_seen and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return "passed"
    if os.WIFSIGNALED(status):
        return f"failed: killed by {signal.Signals(os.WTERMSIG(status)).name}"
    last = _last_stderr_line(workdir)
    if last:
        return f"failed: {last}"
    return f"failed: {_EARLY} (exit code {os.WEXITSTATUS(status)})"


def run_one(request: dict, limits, uid: int, sandboxed: bool) -> str:
    workdir = tempfile.mkdtemp(prefix="ferrylm-prog-")
    if uid >= 0:
        os.chown(workdir, uid, uid)
    token = os.urandom(16).hex().encode()
    token_r, token_w = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:
            try:
                os.close(token_r)
                _run_child(workdir, request["code"], limits, uid, token_w, token)
            finally:
                os._exit(1)
        os.close(token_w)
        status = _wait(pid, float(request["timeout"]))
        _kill_leftovers(pid, sandboxed)
        if status is None:
            os.waitpid(pid, 0)
        fcntl.fcntl(token_r, fcntl.F_SETFL, os.O_NONBLOCK)
        try:
            seen = os.read(token_r, 4096) == token
        except BlockingIOError:
            seen = False
        return _verdict(status, seen, workdir)
    finally:
        os.close(token_r)
        shutil.rmtree(workdir, ignore_errors=True)
        if sandboxed:
            _wipe_tmp()


def main() -> None:
    cpu_s, mem, fsize, nproc, uid, sandboxed = map(int, sys.argv[1:7])
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        status = run_one(request, (cpu_s, mem, fsize, nproc), uid, bool(sandboxed))
        out.write(json.dumps({"nonce": request["nonce"], "status": status}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
