"""`ferrylm <command>`: every command is one row of COMMANDS (at the end): its help, its arguments, its handler.

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
    """One subcommand per row of COMMANDS (at the end of this module): its help, its arguments, its handler."""
    p = argparse.ArgumentParser(
        prog="ferrylm", description="Carry a code LM from data to a served, evaluated endpoint."
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, (help_text, arguments, _) in COMMANDS.items():
        arguments(sub.add_parser(name, help=help_text))
    return p


def _config_args(p, example: str = "train.max_steps=20") -> None:
    p.add_argument("--config", "-c", default=None, help="YAML file or preset name (default: the 'default' preset)")
    p.add_argument("overrides", nargs="*", help=f"dotted overrides, e.g. {example}")


def _doctor_args(p) -> None:
    _config_args(p, "train.liger=true")
    p.add_argument(
        "--pins-only", action="store_true", help="only compare installed packages with the install profile's pins"
    )


def _review_args(p) -> None:
    _config_args(p, "review.samples=40")
    p.add_argument("--host", default=None, help="bind address (default review.host, 127.0.0.1); others can then vote")
    p.add_argument("--port", type=int, default=None, help="port (default review.port, 8765)")
    p.add_argument("--invite", default=None, help="comma-separated reviewers, one link each (review.reviewers)")


def _no_args(p) -> None:
    pass


def _plan_args(p) -> None:
    p.add_argument("setup", help="a preset (ferrylm presets: a40x2, a800-80g, ...) or a run config YAML")
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. data.max_seq_len=2048 hardware.gpus=4")


def _talk_args(p, system: bool) -> None:
    p.add_argument("text", help="the message or prompt; '-' reads it from stdin")
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the endpoint (ferrylm serve prints it)")
    p.add_argument("--model", default="ferrylm", help="served model name (serve.served_name)")
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--triton", action="store_true", help="the endpoint is Triton (ferrylm serve serve.backend=triton)")
    p.add_argument(
        "--api-key-env", default="FERRYLM_API_KEY", help="the variable holding the endpoint's key (serve.api_key_env)"
    )
    if system:
        p.add_argument("--system", default=None, help="a system message")


def _launch_args(p) -> None:
    p.add_argument("--config", "-c", default=None)
    p.add_argument("--nproc", type=int, required=True, help="processes (GPUs) per node")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--rdzv", default=None, help="HOST:PORT every node reaches (multi-node)")
    p.add_argument(
        "--node-timeout",
        type=float,
        default=30.0,
        help="multi-node: seconds a silent peer node may take before this node stops as lost",
    )
    p.add_argument("--slurm", default=None, help="write an sbatch script here instead of launching")
    p.add_argument("--cpus-per-task", type=int, default=16, help="--slurm: CPUs SLURM gives each node's task")
    p.add_argument("--cpu", action="store_true", help="--slurm: ask SLURM for no GPUs (processes on CPUs, gloo)")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.add_argument("overrides", nargs="*")


def _manifest_args(p) -> None:
    p.add_argument("root")
    p.add_argument("--output", "-o", required=True, help="YAML file to write")


def _samples_args(p) -> None:
    p.add_argument("--samples", required=True, help='JSONL of {"task_id", "completion"} lines')
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per program (> 0)")
    p.add_argument("--workers", type=int, default=2, help="programs run at once (>= 1)")
    p.add_argument(
        "--unconfined",
        action="store_true",
        help="run the programs without the bubblewrap jail (limits only; the host is visible to them)",
    )


def _score_args(p) -> None:
    p.add_argument("--benchmark", default="humaneval", help="humaneval, humaneval-x or repo")
    p.add_argument("--tasks", default=None, help="repo: the tasks file ferrylm eval repo-tasks wrote")
    p.add_argument("--language", default=None, help="HumanEval-X: cpp, java, go or rust")
    p.add_argument(
        "--data", default=None, help="HumanEval-X's folder (default eval.humaneval_x_dir / $FERRYLM_HUMANEVAL_X)"
    )
    _samples_args(p)


def _humaneval_args(p) -> None:
    p.set_defaults(benchmark="humaneval", language=None, data=None)
    _samples_args(p)


def _repo_tasks_args(p) -> None:
    p.add_argument("repos", nargs="+", help="repository directories (Python, Go or Rust)")
    p.add_argument("--output", "-o", required=True, help="JSONL file of the tasks found")
    p.add_argument("--test", default=None, help="the test command, run from each repository's root (default: detected)")
    p.add_argument("--runs", type=int, default=3, help="times the original must pass its tests (>= 1)")
    p.add_argument("--limit", type=int, default=None, help="at most this many tasks per repository")
    p.add_argument("--workers", type=int, default=2, help="test runs at once (>= 1)")
    p.add_argument("--suite-timeout", type=float, default=600.0, help="seconds the whole suite may take (> 0)")
    p.add_argument("--unconfined", action="store_true", help="run the tests without the bubblewrap jail")
    p.add_argument(
        "--test-requires",
        default=None,
        help="what the tests need installed, as pip requirements separated by spaces (e.g. 'freezegun pytest-timeout')",
    )


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

    cfg = load_config(args.config, args.overrides)  # a bad key fails here, not on every rank
    if args.slurm:
        with open(args.slurm, "w") as fh:
            fh.write(
                sbatch_script(
                    args.nproc,
                    args.nnodes,
                    args.config,
                    args.overrides,
                    workdir=os.getcwd(),
                    cpus_per_task=args.cpus_per_task,
                    gpus=not args.cpu,
                )
            )
        print(f"ferrylm: wrote {args.slurm}; submit it with: sbatch {args.slurm}")
        return 0
    cmd = torchrun_command(args.nproc, args.config, args.overrides, args.nnodes, args.node_rank, args.rdzv)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    if args.nnodes > 1:  # one node of several: say so when another is lost
        from .train.launch import run_node

        return run_node(cmd, cfg.stage_dir("train") / "checkpoints", args.rdzv, args.nnodes, args.node_timeout)
    os.execv(cmd[0], cmd)


def _talk(args) -> int:
    from .serve.client import stream_text, triton_stream, use_api_key

    use_api_key(os.environ.get(args.api_key_env))
    text = sys.stdin.read() if args.text == "-" else args.text
    kwargs = {"prompt": text}
    if args.command == "chat":
        system = [{"role": "system", "content": args.system}] if args.system else []
        kwargs = {"messages": system + [{"role": "user", "content": text}]}
    if args.triton:  # greedy, as the Triton model decodes
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
    from .eval.tasks.score import score

    if args.benchmark == "repo":
        from .eval.repo import score as score_repo

        if not getattr(args, "tasks", None):
            raise FileNotFoundError("--benchmark repo needs --tasks (the file ferrylm eval repo-tasks wrote)")
        print(json.dumps(score_repo(args.tasks, args.samples, args.workers, args.unconfined), indent=2))
        return 0
    print(
        json.dumps(
            score(
                args.benchmark,
                args.samples,
                args.language,
                args.timeout,
                workers=args.workers,
                unconfined=args.unconfined,
                data=args.data,
            ),
            indent=2,
        )
    )
    return 0


def _repo_tasks(args) -> int:
    from .eval.repo import write_tasks

    found = write_tasks(
        args.repos,
        args.output,
        args.test,
        args.runs,
        args.limit,
        args.workers,
        args.unconfined,
        args.suite_timeout,
        (args.test_requires or "").split() or None,
    )
    for r in found:
        print(json.dumps(r.summary()))
    if not any(r.tasks for r in found):
        from .eval.repo.tasks import RepoTaskError

        raise RepoTaskError(
            f"repo-tasks: no task was written: every repository was skipped or gave no task (the reasons above; "
            f"each repository's in {args.output}.log.jsonl)"
        )
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
    print(
        f"ferrylm: bench report at {record.outputs['md']} (also {record.outputs['html']})"
        + (f"; not measured: {', '.join(failed)} (reasons in the report)" if failed else "")
    )
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


# command -> (its help, what adds its arguments, the function that runs it)
COMMANDS = {
    **{name: (f"run the {name} stage", _config_args, _stage) for name in STAGES[:-1]},
    "run": ("run every stage in order", _config_args, _stage),
    "doctor": ("check this machine against a config, one line per check (exit 1 if one fails)", _doctor_args, _doctor),
    "review": ("serve the blind side-by-side review page for a run's eval outputs (loopback)", _review_args, _review),
    "report": (
        "re-write the eval report with the review votes so far (nothing re-generated)",
        lambda p: _config_args(p, "review.samples=40"),
        _report,
    ),
    "bench": (
        "measure the training strategies that apply here and decoding of each exported artifact: "
        "<run>/bench/bench.{md,html,json}",
        lambda p: _config_args(p, "bench.decode=false"),
        _bench,
    ),
    "presets": ("list the presets shipped in the package", _no_args, _presets),
    "plan": ("predict per-GPU peak memory of a run config's training (Qwen2.5-7B shapes)", _plan_args, _plan),
    "chat": (
        "send a chat message (the server applies the chat template); streams the reply from a running endpoint",
        lambda p: _talk_args(p, system=True),
        _talk,
    ),
    "complete": (
        "complete a raw prompt (no chat template); streams the reply from a running endpoint",
        lambda p: _talk_args(p, system=False),
        _talk,
    ),
    "launch": ("train on several processes / nodes (torchrun), or write a SLURM script", _launch_args, _launch),
    "manifest": (
        "write a repository manifest (data.manifest) from a <priority>/<language>/<repo> tree",
        _manifest_args,
        _manifest,
    ),
    "score": ("score any generator's sample file in the jail (also: ferrylm eval score ...)", _score_args, _score),
    "humaneval": ("score a HumanEval sample file (ferrylm eval score --benchmark humaneval)", _humaneval_args, _score),
    "repo-tasks": (
        "tasks from repositories and their own tests (also: ferrylm eval repo-tasks)",
        _repo_tasks_args,
        _repo_tasks,
    ),
}


def _dispatch(args) -> int:
    return COMMANDS[args.command][2](args)


if __name__ == "__main__":
    sys.exit(main())
