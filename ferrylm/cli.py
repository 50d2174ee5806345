"""`ferrylm data | train | export | serve | eval | run | review | report | bench | doctor | presets | plan | launch | manifest | chat | complete`.

    ferrylm train --config my.yaml train.learning_rate=1e-4 train.max_steps=200
    ferrylm eval score --benchmark humaneval-x --language go --samples samples.jsonl   (eval humaneval: Python)

Known failures (bad config, missing paths, empty corpus, occupied port, parity) print one line
and exit 2 (a failed gating criterion exits 3, after the report is written); nothing half-written is left behind by the stages.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import FerryError

STAGES = ("data", "train", "export", "serve", "eval", "run")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ferrylm", description="Carry a code LM from data to a served, evaluated endpoint.")
    sub = p.add_subparsers(dest="command", required=True)
    for name in STAGES:
        s = sub.add_parser(name, help=f"run the {name} stage" if name != "run" else "run every stage in order")
        s.add_argument("--config", "-c", default=None, help="YAML file or preset name (default: the 'default' preset)")
        s.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.max_steps=20")
    dr = sub.add_parser("doctor", help="check this machine against a config, one line per check (exit 1 if one fails)")
    dr.add_argument("--config", "-c", default=None, help="YAML file or preset name (default: the 'default' preset)")
    dr.add_argument("--pins-only", action="store_true", help="only compare installed packages with the install profile's pins")
    dr.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.liger=true")
    rv = sub.add_parser("review", help="serve the blind side-by-side review page for a run's eval outputs (loopback)")
    rp = sub.add_parser("report", help="re-write the eval report with the review votes so far (nothing re-generated)")
    bn = sub.add_parser("bench", help="measure the training strategies that apply here and decoding of each exported "
                                      "artifact: <run>/bench/bench.{md,html,json}")
    for c in (rv, rp, bn):
        c.add_argument("--config", "-c", default=None, help="YAML file or preset name (default: the 'default' preset)")
        c.add_argument("overrides", nargs="*", help="dotted overrides, e.g. review.samples=40")
    rv.add_argument("--host", default=None, help="bind address (default review.host, 127.0.0.1); others can then vote")
    rv.add_argument("--port", type=int, default=None, help="port (default review.port, 8765)")
    rv.add_argument("--invite", default=None, help="comma-separated reviewers, one link each (review.reviewers)")
    sub.add_parser("presets", help="list the presets shipped in the package")
    pl = sub.add_parser("plan", help="predict per-GPU peak memory of a run config's training (Qwen2.5-7B shapes)")
    pl.add_argument("setup", help="a preset (ferrylm presets: a40x2, a800-80g, ...) or a run config YAML")
    pl.add_argument("overrides", nargs="*", help="dotted overrides, e.g. data.max_seq_len=2048 hardware.gpus=4")
    for name, what in (("chat", "send a chat message (the server applies the chat template)"),
                       ("complete", "complete a raw prompt (no chat template)")):
        c = sub.add_parser(name, help=f"{what}; streams the reply from a running endpoint")
        c.add_argument("text", help="the message or prompt; '-' reads it from stdin")
        c.add_argument("--url", default="http://127.0.0.1:8000", help="the endpoint (ferrylm serve prints it)")
        c.add_argument("--model", default="ferrylm", help="served model name (serve.served_name)")
        c.add_argument("--max-tokens", type=int, default=512)
        c.add_argument("--temperature", type=float, default=0.0)
        c.add_argument("--triton", action="store_true", help="the endpoint is Triton (ferrylm serve serve.backend=triton)")
        if name == "chat":
            c.add_argument("--system", default=None, help="a system message")
    la = sub.add_parser("launch", help="train on several processes / nodes (torchrun), or write a SLURM script")
    la.add_argument("--config", "-c", default=None)
    la.add_argument("--nproc", type=int, required=True, help="processes (GPUs) per node")
    la.add_argument("--nnodes", type=int, default=1)
    la.add_argument("--node-rank", type=int, default=0)
    la.add_argument("--rdzv", default=None, help="HOST:PORT every node reaches (multi-node)")
    la.add_argument("--slurm", default=None, help="write an sbatch script here instead of launching")
    la.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    la.add_argument("overrides", nargs="*")
    mf = sub.add_parser("manifest", help="write a repository manifest (data.manifest) from a <priority>/<language>/<repo> tree")
    mf.add_argument("root")
    mf.add_argument("--output", "-o", required=True, help="YAML file to write")
    _score_parsers(sub)
    rt = sub.add_parser("repo-tasks", help="tasks from repositories and their own tests (also: ferrylm eval repo-tasks)")
    rt.add_argument("repos", nargs="+", help="repository directories (Python or Go)")
    rt.add_argument("--output", "-o", required=True, help="JSONL file of the tasks found")
    rt.add_argument("--test", default=None, help="the test command, run from each repository's root (default: detected)")
    rt.add_argument("--runs", type=int, default=3, help="times the original must pass its tests (>= 1)")
    rt.add_argument("--limit", type=int, default=None, help="at most this many tasks per repository")
    rt.add_argument("--workers", type=int, default=2, help="test runs at once (>= 1)")
    rt.add_argument("--suite-timeout", type=float, default=600.0, help="seconds the whole suite may take (> 0)")
    rt.add_argument("--unconfined", action="store_true", help="run the tests without the bubblewrap jail")
    return p


def _score_parsers(sub) -> None:
    """`score` (any benchmark, any language) and its Python-only alias `humaneval`."""
    sc = sub.add_parser("score", help="score any generator's sample file in the jail (also: ferrylm eval score ...)")
    he = sub.add_parser("humaneval", help="score a HumanEval sample file (ferrylm eval score --benchmark humaneval)")
    he.set_defaults(benchmark="humaneval", language=None, data=None)
    sc.add_argument("--benchmark", default="humaneval", help="humaneval, humaneval-x or repo")
    sc.add_argument("--tasks", default=None, help="repo: the tasks file ferrylm eval repo-tasks wrote")
    sc.add_argument("--language", default=None, help="HumanEval-X: cpp, java, go or rust")
    sc.add_argument("--data", default=None, help="HumanEval-X's folder (default eval.humaneval_x_dir / $FERRYLM_HUMANEVAL_X)")
    for c in (sc, he):
        c.add_argument("--samples", required=True, help='JSONL of {"task_id", "completion"} lines')
        c.add_argument("--timeout", type=float, default=10.0, help="seconds per program (> 0)")
        c.add_argument("--workers", type=int, default=2, help="programs run at once (>= 1)")
        c.add_argument("--unconfined", action="store_true",
                       help="run the programs without the bubblewrap jail (limits only; the host is visible to them)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] in (["eval", "humaneval"], ["eval", "score"], ["eval", "repo-tasks"]):
        argv = argv[1:]
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except FerryError as e:
        print(f"ferrylm: error: {e}", file=sys.stderr)
        return e.exit_code
    except FileNotFoundError as e:
        print(f"ferrylm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ferrylm: interrupted", file=sys.stderr)
        return 130


def _presets(args) -> int:
    from .config import preset_names

    print("\n".join(preset_names()))
    return 0


def _doctor(args) -> int:
    from .config import load_config
    from .doctor import doctor

    return doctor(load_config(args.config, args.overrides), pins_only=args.pins_only)


def _plan(args) -> int:
    from .train.plan import load_setup, report

    setup, notes = load_setup(args.setup, args.overrides)
    print(report(args.setup, setup, notes))
    return 0


def _launch(args) -> int:
    from .config import load_config
    from .train.launch import sbatch_script, torchrun_command

    load_config(args.config, args.overrides)   # a bad key fails here, not on every rank
    if args.slurm:
        with open(args.slurm, "w") as fh:
            fh.write(sbatch_script(args.nproc, args.nnodes, args.config, args.overrides, workdir=os.getcwd()))
        print(f"ferrylm: wrote {args.slurm}; submit it with: sbatch {args.slurm}")
        return 0
    cmd = torchrun_command(args.nproc, args.config, args.overrides, args.nnodes, args.node_rank, args.rdzv)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    os.execv(cmd[0], cmd)


def _talk(args) -> int:
    from .serve.client import stream_text, triton_stream

    text = sys.stdin.read() if args.text == "-" else args.text
    kwargs = {"prompt": text}
    if args.command == "chat":
        system = [{"role": "system", "content": args.system}] if args.system else []
        kwargs = {"messages": system + [{"role": "user", "content": text}]}
    if args.triton:   # greedy, as the Triton model decodes
        pieces = triton_stream(args.url.rstrip("/"), args.model, args.max_tokens, **kwargs)
    else:
        pieces = stream_text(args.url.rstrip("/"), args.model, args.max_tokens, temperature=args.temperature, **kwargs)
    for piece in pieces:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def _manifest(args) -> int:
    import yaml

    from .data.corpus import manifest_from_layout

    doc = manifest_from_layout(args.root)
    with open(args.output, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False, allow_unicode=True)
    print(f"ferrylm: {len(doc['repositories'])} repositories written to {args.output}")
    return 0


def _score(args) -> int:
    from .eval.score import score

    if args.benchmark == "repo":
        from .eval.repo import score as score_repo

        if not getattr(args, "tasks", None):
            raise FileNotFoundError("--benchmark repo needs --tasks (the file ferrylm eval repo-tasks wrote)")
        print(json.dumps(score_repo(args.tasks, args.samples, args.workers, args.unconfined), indent=2))
        return 0
    print(json.dumps(score(args.benchmark, args.samples, args.language, args.timeout, workers=args.workers,
                           unconfined=args.unconfined, data=args.data), indent=2))
    return 0


def _repo_tasks(args) -> int:
    from .eval.repo import write_tasks

    found = write_tasks(args.repos, args.output, args.test, args.runs, args.limit, args.workers, args.unconfined,
                        args.suite_timeout)
    for r in found:
        print(json.dumps(r.summary()))
    print(f"ferrylm: {sum(len(r.tasks) for r in found)} tasks written to {args.output}")
    return 0


def _review(args) -> int:
    from .config import load_config
    from .review import run_review

    flags = [f"review.{k}={v}" for k, v in (("host", args.host), ("port", args.port)) if v is not None]
    if args.invite:
        flags.append(f"review.reviewers=[{','.join(n.strip() for n in args.invite.split(',') if n.strip())}]")
    run_review(load_config(args.config, [*args.overrides, *flags]))
    return 0


def _report(args) -> int:
    from .config import load_config
    from .eval import rewrite_report

    cfg = load_config(args.config, args.overrides)
    report = rewrite_report(cfg)
    human = report["details"].get("human")
    votes = f"{human['votes']} votes" if human else "no votes yet"
    print(f"ferrylm: report at {cfg.stage_dir('eval') / 'report.md'} ({votes})")
    return 0


def _bench(args) -> int:
    from .bench import run_bench
    from .config import load_config

    record = run_bench(load_config(args.config, args.overrides))
    failed = record.metrics["failed"]
    print(f"ferrylm: bench report at {record.outputs['md']} (also {record.outputs['html']})"
          + (f"; not measured: {', '.join(failed)} (reasons in the report)" if failed else ""))
    return 0


def _stage(args) -> int:
    from .config import load_config
    from .log import setup_logging
    from .preflight import check_inputs

    cfg = load_config(args.config, args.overrides)
    check_inputs(args.command, cfg)
    setup_logging(f"{cfg.run_dir}/ferrylm.log")
    if args.command == "run":
        from .pipeline import run_all

        out = run_all(cfg)[-1].outputs
        print(f"ferrylm: report at {out['md']} (also {out['html']} and {out['json']})")
        return 0
    module = __import__(f"ferrylm.{args.command}", fromlist=["_"])
    record = getattr(module, f"run_{args.command}")(cfg)
    if os.environ.get("RANK", "0") == "0":  # under a launcher, one rank speaks
        print(json.dumps({"stage": record.stage, "outputs": record.outputs}, indent=2))
    return 0


COMMANDS = {**dict.fromkeys(STAGES, _stage), "presets": _presets, "doctor": _doctor, "plan": _plan, "launch": _launch,
            "chat": _talk, "complete": _talk, "manifest": _manifest, "humaneval": _score, "score": _score, "repo-tasks": _repo_tasks, "review": _review, "report": _report,
            "bench": _bench}


def _dispatch(args) -> int:
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
