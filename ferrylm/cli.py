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

from . import cli_tools as tools
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
    _leave_process_group()
    if os.environ.get("RANK", "0") == "0":  # under a launcher, one rank speaks
        print(json.dumps({"stage": record.stage, "outputs": record.outputs}, indent=2))
    return 0


def _leave_process_group() -> None:
    """A launched stage's process group ended while Python still runs: left to the interpreter's exit, gloo's
    worker threads now and then abort the process ("terminate called without an active exception")."""
    dist = sys.modules.get("torch.distributed")  # only a stage that trained has it; the others skip torch
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier()  # no rank leaves while another still gathers or saves
        dist.destroy_process_group()


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
        lambda p: tools.talk_args(p, system=True),
        tools.talk,
    ),
    "complete": (
        "complete a raw prompt (no chat template); streams the reply from a running endpoint",
        lambda p: tools.talk_args(p, system=False),
        tools.talk,
    ),
    "launch": (
        "train on several processes / nodes (torchrun), or write a SLURM script",
        tools.launch_args,
        tools.launch,
    ),
    "manifest": (
        "write a repository manifest (data.manifest) from a <priority>/<language>/<repo> tree",
        tools.manifest_args,
        tools.manifest,
    ),
    "score": (
        "score any generator's sample file in the sandbox (also: ferrylm eval score ...)",
        tools.score_args,
        tools.score,
    ),
    "humaneval": (
        "score a HumanEval sample file (ferrylm eval score --benchmark humaneval)",
        tools.humaneval_args,
        tools.score,
    ),
    "repo-tasks": (
        "tasks from repositories and their own tests (also: ferrylm eval repo-tasks)",
        tools.repo_tasks_args,
        tools.repo_tasks,
    ),
}


def _dispatch(args) -> int:
    return COMMANDS[args.command][2](args)


if __name__ == "__main__":
    sys.exit(main())
