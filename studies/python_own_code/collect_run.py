"""A run's `wait` archive ($TAG.tgz) into a results folder, in the form lever_table.py and failed_tasks.py read.

    python studies/python_own_code/collect_run.py TAG.tgz CORPUS OUT_DIR

Every track's samples (own-code functions and repositories in each language, HumanEval) become one file a track,
`<corpus>_<track>.jsonl`: a row a task, each model's passed, result and reply under its label ("base", "fine-tuned",
"base + retrieval", ...). Beside them the run's train record, loss history, stage times and report, prefixed with the
corpus. A track whose models are missing a task keeps the task for the models that have it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

# <benchmark>_<language>_<label>.jsonl as the eval writes them (ferrylm/eval/tasks/benchmark.py: results_file)
SAMPLES = re.compile(r"^(own_functions|own_repos|humaneval)_([a-z+]+)_(.+)\.jsonl$")
KEPT = {"train/record.json": "train_record.json", "train/log_history.jsonl": "log_history.jsonl"}
KEPT_EVAL = ("report.json", "report.md")


def tracks(eval_dir: Path) -> dict[str, dict[str, dict]]:
    """track → task id → {"task_id", label: {passed, result, completion}} from the eval's sample files."""
    out: dict[str, dict[str, dict]] = {}
    for f in sorted(eval_dir.glob("*.jsonl")):
        m = SAMPLES.match(f.name)
        if not m or m[3].endswith(".replies"):
            continue
        track, label = f"{m[1]}_{m[2]}", re.sub(r"^(\w+)-(\d+-shot)$", r"\1 \2", m[3].replace("-+-", " + "))
        rows = out.setdefault(track, {})
        for r in map(json.loads, f.read_text().splitlines()):
            row = rows.setdefault(r["task_id"], {"task_id": r["task_id"]})
            row[label] = {k: r.get(k) for k in ("passed", "result", "completion")}
    return out


def collect(archive: Path, corpus: str, out: Path) -> list[str]:
    """The archive's samples and records into `out`; the names written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
        tag = archive.name.removesuffix(".tgz")
        run = Path(tmp) / tag
        for track, rows in tracks(run / "eval").items():
            name = f"{corpus}_{track}.jsonl"
            (out / name).write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
            written.append(name)
        kept = {**KEPT, **{f"eval/{n}": n for n in KEPT_EVAL}, f"../{tag}.times.txt": "times.txt"}
        for src, dst in kept.items():
            if (run / src).is_file():
                shutil.copy(run / src, out / f"{corpus}_{dst}")
                written.append(f"{corpus}_{dst}")
    return written


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("archive", type=Path, help="a `wait` call's $TAG.tgz")
    ap.add_argument("corpus", help="the name the files take (team, second)")
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    print("\n".join(collect(args.archive, args.corpus, args.out)))


if __name__ == "__main__":
    main()
