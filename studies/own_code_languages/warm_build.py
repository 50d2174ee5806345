"""How long finding a crate's tasks takes with each run cold (the crate compiled in the run) and from its warm build
(ferrylm/eval/repo/warm.py), each in a cache of its own so neither reads the other's tasks or build.

    .venv/bin/python studies/own_code_languages/warm_build.py /usr/share/cargo/registry/strsim-0.10.0 cold
    .venv/bin/python studies/own_code_languages/warm_build.py /usr/share/cargo/registry/strsim-0.10.0 warm
"""

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="warm-build-")  # found tasks and warm builds: none kept

from ferrylm.eval.repo import runner  # noqa: E402
from ferrylm.eval.repo.tasks import find_tasks  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("crate", type=Path)
    ap.add_argument("mode", choices=["cold", "warm"])
    args = ap.parse_args()
    if args.mode == "cold":
        runner.warm_target = lambda *_: None  # every run compiles the crate, as before the warm build
    repo = Path(tempfile.mkdtemp()) / args.crate.name
    shutil.copytree(args.crate, repo)
    t = time.time()
    found = find_tasks(repo, workers=2)
    print(f"{args.mode}: {len(found.tasks)} tasks, dropped {dict(found.dropped)}, {time.time() - t:.1f} s")


if __name__ == "__main__":
    main()
