"""The commands beside the stages (cli.py's COMMANDS names them): talking to an endpoint, launching training on
several processes, writing a manifest, scoring sample files and finding repository tasks; each one's arguments
and handler. Known failures raise FerryError (cli.main prints one line)."""

from __future__ import annotations

import json
import os
import sys


def talk_args(p, system: bool) -> None:
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


def launch_args(p) -> None:
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


def manifest_args(p) -> None:
    p.add_argument("root")
    p.add_argument("--output", "-o", required=True, help="YAML file to write")


def samples_args(p) -> None:
    p.add_argument("--samples", required=True, help='JSONL of {"task_id", "completion"} lines')
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per program (> 0)")
    p.add_argument("--workers", type=int, default=2, help="programs run at once (>= 1)")
    p.add_argument(
        "--unconfined",
        action="store_true",
        help="run the programs without the bubblewrap sandbox (limits only; the host is visible to them)",
    )


def score_args(p) -> None:
    p.add_argument("--benchmark", default="humaneval", help="humaneval, humaneval-x or repo")
    p.add_argument("--tasks", default=None, help="repo: the tasks file ferrylm eval repo-tasks wrote")
    p.add_argument("--language", default=None, help="HumanEval-X: cpp, java, go or rust")
    p.add_argument(
        "--data", default=None, help="HumanEval-X's folder (default eval.humaneval_x_dir / $FERRYLM_HUMANEVAL_X)"
    )
    samples_args(p)


def humaneval_args(p) -> None:
    p.set_defaults(benchmark="humaneval", language=None, data=None)
    samples_args(p)


def repo_tasks_args(p) -> None:
    p.add_argument("repos", nargs="+", help="repository directories (Python, Go, Rust, Java or C++)")
    p.add_argument("--output", "-o", required=True, help="JSONL file of the tasks found")
    p.add_argument("--test", default=None, help="the test command, run from each repository's root (default: detected)")
    p.add_argument("--runs", type=int, default=3, help="times the original must pass its tests (>= 1)")
    p.add_argument("--limit", type=int, default=None, help="at most this many tasks per repository")
    p.add_argument("--workers", type=int, default=2, help="test runs at once (>= 1)")
    p.add_argument("--suite-timeout", type=float, default=600.0, help="seconds the whole suite may take (> 0)")
    p.add_argument("--unconfined", action="store_true", help="run the tests without the bubblewrap sandbox")
    p.add_argument(
        "--test-requires",
        default=None,
        help="what the tests need installed, as pip requirements separated by spaces (e.g. 'freezegun pytest-timeout')",
    )


def launch(args) -> int:
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


def talk(args) -> int:
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


def manifest(args) -> int:
    import yaml

    from .data.corpus import manifest_from_layout

    doc = manifest_from_layout(args.root)
    with open(args.output, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False, allow_unicode=True)
    print(f"ferrylm: {len(doc['repositories'])} repositories written to {args.output}")
    return 0


def score(args) -> int:
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


def repo_tasks(args) -> int:
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
        print(f"ferrylm: {r.repo}: {len(r.tasks)} tasks of {len(r.considered)} functions considered", end="")
        print("".join(f"; {n} {why}" for why, n in r.dropped.most_common()) or "")
    print(f"ferrylm: each function's verdict and reason: {args.output}.functions.jsonl")
    if not any(r.tasks for r in found):
        from .eval.repo.tasks import RepoTaskError

        raise RepoTaskError(
            f"repo-tasks: no task was written: every repository was skipped or gave no task (the reasons above; "
            f"each repository's in {args.output}.log.jsonl)"
        )
    print(f"ferrylm: {sum(len(r.tasks) for r in found)} tasks written to {args.output}")
    return 0
