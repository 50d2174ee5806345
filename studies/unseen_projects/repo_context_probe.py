"""Does showing the file help a model that can code? Own-code Pass@1 asked with the signature and doc
comment alone (eval.repo_context=none) against the function's file with its body cut out (file), same
tasks, same model, greedy; McNemar's test between the two. `--settings file file-below`: the file as shipped
against the same window with half its room kept for the file below the hole (a method's class goes on there;
the shipped window shows a median 1 % of its characters below the hole).

    .venv/bin/python studies/unseen_projects/repo_context_probe.py DIR[:REQ,REQ...] [...] --model qwen2.5-coder-0.5b \\
        --limit 10 --out studies/unseen_projects/results/repo_context_probe_0.5b.json
    python3 studies/unseen_projects/repo_context_probe.py --run KEY=VALUE ... --out probe.json [--file-passed PASSED_JSON]

--run: instead of DIRs, the tasks of a run's own-code tracks (the demo-gpu preset with these overrides; the
tasks its eval finds, read back from eval.repo_task_cache) and the run's base model.

REQ: what that repository's tests need installed (repo-tasks' --test-requires). On a CPU the model runs
in fp32 through transformers' generate: slow, but the outcome of a greedy reply does not depend on speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from ferrylm.config import load_config
from ferrylm.eval.generators import LocalGenerator
from ferrylm.eval.repo import context
from ferrylm.eval.repo.splice import score
from ferrylm.eval.repo.tasks import find_tasks
from ferrylm.eval.report.paired import mcnemar_exact
from ferrylm.eval.tasks import own_code
from ferrylm.manifest import read_record
from ferrylm.models import resolve_model_path
from ferrylm.prompts import code_block_closed, user_message

WORKERS = 8  # tasks scored at once
SETTINGS = {
    "none": lambda t, budget: user_message(t["prompt"], t["language"]),
    "file": lambda t, budget: context.question(t, budget),
    # half the room the imports leave kept for the file below the hole (file_context.trimmed's after_share)
    "file-below": lambda t, budget: context.question(t, budget, after_share=0.5),
}


def run_tasks(overrides: list[str]) -> tuple[list[dict], str]:
    """The own-code tasks of a run (all its tracks) and its base model's path."""
    cfg = load_config("demo-gpu", overrides)
    tracks = own_code.tracks(cfg.eval, read_record(cfg.stage_dir("data"))["outputs"])
    return [t for track in tracks for t in track.problems], resolve_model_path(cfg.model.path, cfg.model.cache_dir)


def passed(tasks: list[dict], replies: dict[str, str]) -> dict[str, bool]:
    with tempfile.TemporaryDirectory() as tmp:
        tpath, spath = Path(tmp) / "tasks.jsonl", Path(tmp) / "samples.jsonl"
        tpath.write_text("".join(json.dumps(t) + "\n" for t in tasks))
        spath.write_text("".join(json.dumps({"task_id": i, "completion": r}) + "\n" for i, r in replies.items()))
        results = [json.loads(line) for line in Path(score(tpath, spath, WORKERS)["results"]).read_text().splitlines()]
    return {r["task_id"]: r["passed"] for r in results}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repos", nargs="*", help="DIR, or DIR:REQ,REQ for the pip requirements its tests need")
    ap.add_argument("--run", nargs="+", metavar="KEY=VALUE", help="a run's own-code tasks instead (demo-gpu + these)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--limit", type=int, default=10, help="tasks per repository")
    ap.add_argument("--budget", type=int, default=768, help="eval.repo_context_tokens")
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=["none", "file"])
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--file-passed",
        type=Path,
        help="an earlier run's passed.json (a results folder's) whose base columns stand for 'file', not asked again: "
        "the same model, question and greedy decoding (across runs nearly, not exactly, the same replies)",
    )
    args = ap.parse_args(argv)
    tasks: list[dict] = []
    if args.run:
        tasks, args.model = run_tasks(args.run)
        print(f"the run's own-code tracks: {len(tasks)} tasks", flush=True)
    for arg in args.repos:
        repo, _, reqs = arg.partition(":")
        found = find_tasks(
            Path(repo).resolve(), limit=args.limit, test_requires=[r for r in reqs.split(",") if r] or None
        )
        print(f"{repo}: {len(found.tasks)} tasks", flush=True)
        tasks += found.tasks
    model = args.model if args.run else resolve_model_path(args.model, load_config("default").model.cache_dir)
    gen = LocalGenerator(model)
    report: dict = {"model": str(args.model), "tasks": len(tasks), "budget_tokens": args.budget, "settings": {}}
    outcome: dict[str, dict[str, bool]] = {}
    asked = {name: SETTINGS[name] for name in dict.fromkeys(["file", *args.settings])}  # each against "file"
    if args.file_passed:
        outcome["file"] = earlier_base(args.file_passed, tasks)
        report["settings"]["file"] = {"passed": sum(outcome["file"].values()), "from": str(args.file_passed)}
        print(f"file: {sum(outcome['file'].values())}/{len(tasks)} (from {args.file_passed})", flush=True)
    for name, ask in ((n, a) for n, a in asked.items() if n not in outcome):
        t0, replies = time.perf_counter(), {}
        for t in tasks:
            question = [{"role": "user", "content": ask(t, args.budget)}]
            replies[t["task_id"]] = gen.chat(question, args.max_new_tokens, until=code_block_closed)[0]
        outcome[name] = passed(tasks, replies)
        report["settings"][name] = {
            "passed": sum(outcome[name].values()),
            "seconds": round(time.perf_counter() - t0),
            "replies": replies,
        }
        print(f"{name}: {sum(outcome[name].values())}/{len(tasks)}", flush=True)
        compared(report, outcome, tasks)
        if args.out:  # as each setting ends: a machine taken back mid-run still leaves what it measured
            args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k not in ("settings", "per_task")}))
    return 0


def earlier_base(passed_json: Path, tasks: list[dict]) -> dict[str, bool]:
    """Each task's outcome in an earlier run's base columns of its own-code tracks (the 'file' setting as the eval
    asks it); refused unless those columns asked exactly as many tasks as this probe has."""
    columns = {
        k: v for k, v in json.loads(passed_json.read_text()).items() if k.startswith("own_") and k.endswith("_base")
    }
    passed = {i for v in columns.values() for i in v["passed"]}
    if sum(v["tasks"] for v in columns.values()) != len(tasks) or not passed <= {t["task_id"] for t in tasks}:
        raise SystemExit(
            f"{passed_json}: its base columns ({', '.join(columns)}) did not ask this probe's {len(tasks)} tasks"
        )
    return {t["task_id"]: t["task_id"] in passed for t in tasks}


def compared(report: dict, outcome: dict[str, dict[str, bool]], tasks: list[dict]) -> None:
    """Each setting asked so far against "file" (McNemar), per task and per split, into `report`."""
    for other in (s for s in outcome if s != "file"):  # "none": the keys the first runs wrote
        only_file = sum(outcome["file"][i] and not outcome[other][i] for i in outcome["file"])
        only_other = sum(outcome[other][i] and not outcome["file"][i] for i in outcome["file"])
        p = mcnemar_exact(only_file, only_other)
        report |= {"only_file": only_file, "only_none": only_other, "mcnemar_p": p} if other == "none" else {}
        report.setdefault("against_file", {})[other] = {"won": only_other, "lost": only_file, "mcnemar_p": p}
    report["per_task"] = {i: {s: outcome[s][i] for s in outcome} for i in outcome["file"]}
    splits = {t["task_id"]: t.get("split", "repositories") for t in tasks}
    report["by_split"] = {
        split: {"tasks": sum(v == split for v in splits.values())}
        | {s: sum(outcome[s][i] for i in outcome[s] if splits[i] == split) for s in outcome}
        for split in sorted(set(splits.values()))
    }


if __name__ == "__main__":
    sys.exit(main())
