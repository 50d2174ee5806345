"""Does a Go repository task gain from a warm build cache, in the sandbox the eval runs it in?

    .venv/bin/python studies/go_build_cache/go_build_cache.py .cache/ferrylm/demo-repos-gpu/go-gods trees/avltree/avltree.go

Times `go test -count=1 ./PKG/` after a one-line change to FILE (as a task's reply changes its package), four
runs each: outside the sandbox on an empty cache and on a warm one; then through the product's sandbox
(eval/repo/runner.py) as it runs today (an empty cache in each run), and with a cache warmed outside by
`go build ./...` bound in and copied into each run (runner's program and binds wrapped here, not changed),
without and with `-trimpath` on both sides.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ferrylm.eval.repo import runner
from ferrylm.eval.repo.facts import facts_of


def outside(repo: Path, pkg: str, rel: str, cache: Path) -> list[float]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cache.parent), "GOCACHE": str(cache), **runner.GO_VARS}
    times, src = [], (repo / rel).read_text()
    for i in range(4):
        (repo / rel).write_text(src + f"\n// {i}\n")
        t0 = time.perf_counter()
        subprocess.run(["go", "test", "-count=1", f"./{pkg}/"], cwd=repo, env=env, check=True, capture_output=True)
        times.append(round(time.perf_counter() - t0, 2))
    (repo / rel).write_text(src)
    return times


def sandboxed(repo: Path, pkg: str, rel: str) -> list[float]:
    src, times = (repo / rel).read_text(), []
    with runner.sandbox(facts_of(repo, "go", "go test ./..."), 120, 1) as box:
        for i in range(4):
            t0 = time.perf_counter()
            status = runner.run(box, f"go test -count=1 ./{pkg}/", {rel: src + f"\n// {i}\n"}).status
            times.append(round(time.perf_counter() - t0, 2))
            assert status == "passed", status
    return times


def with_warm_cache(warm: Path, trimpath: bool):
    """runner's sandbox program copying `warm` in as the run's cache, and its binds showing it to the sandbox."""
    program, binds, env = runner.program, runner.binds_for, runner.GO_ENV
    flag = "-mod=mod\\ -trimpath" if trimpath else "-mod=mod"

    def warmed(*args, **kwargs) -> dict:
        code = program(*args, **kwargs)
        shell, opt, script = code["steps"][0]
        copy = f" && cp -r {warm} .gocache && chmod -R u+w .gocache && cp -r "
        return {**code, "steps": [[shell, opt, script.replace(" && cp -r ", copy, 1)]]}

    runner.program, runner.binds_for = warmed, lambda packages: binds(packages) + [str(warm)]
    runner.GO_ENV = env.replace("GOFLAGS=-mod=mod", f"GOFLAGS={flag}")
    return lambda: (
        setattr(runner, "program", program),
        setattr(runner, "binds_for", binds),
        setattr(runner, "GO_ENV", env),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", type=Path, help="a Go module (its go.mod at the top)")
    ap.add_argument("file", help="a file of the package to change, relative to the module")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="go-cache-"))
    repo = tmp / "repo"
    shutil.copytree(a.repo, repo)
    pkg = str(Path(a.file).parent)
    print("outside, empty cache each run:", [outside(repo, pkg, a.file, tmp / f"c{i}")[0] for i in range(4)])
    print("outside, one cache kept:", outside(repo, pkg, a.file, tmp / "kept"))
    print("sandbox as today:", sandboxed(repo, pkg, a.file))
    for trimpath in (False, True):
        warm = tmp / f"warm-{trimpath}"
        flags = "-mod=mod -trimpath" if trimpath else "-mod=mod"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "GOCACHE": str(warm), **runner.GO_VARS, "GOFLAGS": flags}
        subprocess.run(["go", "build", "./..."], cwd=repo, env=env, check=True)
        undo = with_warm_cache(warm, trimpath)
        try:
            print(f"sandbox, warm cache copied in (trimpath {trimpath}):", sandboxed(repo, pkg, a.file))
        finally:
            undo()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
