"""`run_eval(cfg)`: the eval stage's entry function and its helpers (what the stage does: the
package's docstring)."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ..config import Config
from ..errors import FerryError
from ..log import get_logger
from ..manifest import (
    StageRecord,
    locked_stage,
    read_jsonl,
    read_record,
    stage_lock,
    write_json_atomic,
    write_text_atomic,
)
from ..models import resolve_model_path
from ..serve.client import use_api_key
from .execution.queue import ExecutionQueue
from .generators import EndpointGenerator, LocalGenerator, TritonGenerator
from .heldout import examples as heldout
from .heldout.few_shot import FewShot, with_shots
from .heldout.loss import example_losses, losses_of
from .latency import engine_latency, latency
from .repo.retrieval import LABEL, with_retrieval
from .report import helped
from .report.criteria import Criterion, criteria_values, gate_failures, load_criteria, per_track, with_pass_at_1_lost
from .report.render import language_rows, write_report
from .tasks import benchmark

log = get_logger("eval")


class GateFailed(FerryError, RuntimeError):
    """A gating criterion failed; the report is written, the exit code says so."""

    exit_code = 3


def measure(
    cfg: Config,
    generator,
    tracks: list[benchmark.Track],
    rows: list[dict],
    out: Path,
    label: str,
    losses: list | None = None,
    shots: FewShot | None = None,
    timed: bool = True,
    queue: ExecutionQueue | None = None,
) -> tuple[dict, list[dict]]:
    """The benchmarks' tracks and the held-out examples through `generator`, shown `shots` first when
    given; latency first when it is an endpoint (it needs streaming) or an in-process engine, and the
    model is asked cold. Returns the measures and the scored held-out examples, which (with their loss,
    when measured) are also written to heldout_<label>.jsonl. `queue`: executes the replies beside
    what follows (the benchmarks' measures stand as a future until ExecutionQueue.results)."""
    e = cfg.eval
    measured = {"latency": _latency(cfg, generator, label, queue) if timed and shots is None else None}
    log.info(
        "[%s] %s (%s prompts) × %d samples",
        label,
        ", ".join(f"{t.title}: {len(t.problems)} tasks" for t in tracks),
        e.prompt_mode,
        e.samples_per_task,
    )
    later = queue.later if queue else None
    measured["benchmarks"] = benchmark.measure(generator, tracks, e, out, label, shots, later)
    log.info(
        "[%s] %d held-out examples (%s)",
        label,
        len(rows),
        ", ".join(f"{t}: {sum(heldout.task_of(r) == t for r in rows)}" for t in heldout.TASKS),
    )
    replies = heldout.generate_replies(generator, rows, e.max_new_tokens, e.concurrency, shots)
    scored = heldout.score_rows(rows, replies)
    for rec, loss in zip(scored, losses or []):
        rec["loss"] = loss
    measured["heldout"] = heldout.summarize(scored)
    write_text_atomic(out / heldout_file(label), "".join(json.dumps(r) + "\n" for r in scored))
    return measured, scored


def _latency(cfg: Config, generator, label: str, queue: ExecutionQueue | None) -> dict | None:
    """The model's speed, asked cold, with no execution running beside it: a served endpoint's (vLLM's,
    Triton's: it needs streaming) or the in-process engine's; None for neither."""
    e = cfg.eval
    served, engine = hasattr(generator, "timed_stream"), getattr(generator, "engine", None) is not None
    if not e.latency_runs:  # not asked for: the report says "not measured"
        return None
    if (served or engine) and queue:
        queue.settle()  # the tests of the model before run on this machine's cores
    if served:
        log.info(
            "[%s] latency of %d new tokens, %d runs, concurrency %s",
            label,
            e.latency_new_tokens,
            e.latency_runs,
            e.latency_concurrency,
        )
        return latency(
            generator.base_url,
            generator.model,
            e.latency_new_tokens,
            e.latency_runs,
            e.latency_concurrency,
            generator.timed_stream,
        )
    if engine:
        log.info("[%s] latency of %d new tokens in-process, %d runs", label, e.latency_new_tokens, e.latency_runs)
        return engine_latency(generator, e.latency_new_tokens, e.latency_runs)
    return None


def heldout_file(label: str) -> str:
    return f"heldout_{benchmark.file_label(label)}.jsonl"


def heldout_losses(losses, label: str) -> list | None:
    """`losses()` — one model's held-out loss per example, in-process — or None with the reason logged."""
    try:
        return losses()
    except Exception as e:  # noqa: BLE001 — a model transformers cannot load here is reported, not fatal
        log.warning(
            "[%s] held-out loss not measured: %s", label, str(e).splitlines()[0] if str(e) else type(e).__name__
        )
        return None


def _training(cfg: Config) -> tuple[dict | None, list[dict]]:
    """The train stage's metrics and its loss history, or (None, []) without a train stage."""
    try:
        trained = read_record(cfg.stage_dir("train"))
        return trained["metrics"], read_jsonl(trained["outputs"]["log_history"])
    except FileNotFoundError:
        return None, []


def _write(cfg: Config, criteria: list[Criterion], models: dict, details: dict, history: list[dict]) -> dict:
    """The report, with the people's verdict where votes exist (`ferrylm review`); the human
    criterion gates only with review.required."""
    from ..review import human_verdict

    human = human_verdict(cfg)
    criteria = [replace(c, gate=cfg.review.required) if c.key == "human_correct" else c for c in criteria]
    details = {k: v for k, v in details.items() if k != "human"} | ({"human": human} if human else {})
    models = {
        m: {**v, "human_correct": human["models"][m]["rate"] if human and m in human["models"] else None}
        for m, v in models.items()
    }
    return write_report(cfg.stage_dir("eval"), criteria, models, details, history, cfg.eval.criteria)


def rewrite_report(cfg: Config) -> dict:
    """`ferrylm report`: the eval report again from its own report.json and the votes so far; nothing
    is generated or executed again. The record stays (under the stage's lock) and is re-written
    after the report, which it must not be older than."""
    out = cfg.stage_dir("eval")
    read_record(out)  # a finished eval stage, or one line saying to run it
    with stage_lock(out, "eval", withdraw=False):
        record = json.loads((out / "record.json").read_text())
        old = json.loads((out / "report.json").read_text())
        criteria = [Criterion(r["criterion"], r["label"], r["op"], r["target"], r["gate"]) for r in old["criteria"]]
        report = _write(cfg, criteria, old["models"], old["details"], _training(cfg)[1])
        record["metrics"] = {"models": report["models"], "failed_gates": report["failed_gates"]}
        write_json_atomic(out / "record.json", record)
    return report


def measure_models(
    cfg: Config,
    tracks: list[benchmark.Track],
    rows: list[dict],
    out: Path,
    shots: FewShot | None = None,
    retrieved: list[benchmark.Track] = (),
) -> dict[str, tuple[dict, list[dict]]]:
    """label → what measure() found (the measures, the scored held-out examples): the endpoint given
    (eval.endpoint), or the exported model, (eval.compare_base) the base, and (with `shots`) the base
    shown them, each in-process (eval.local) or served (vLLM; tritonserver with serve.backend=triton),
    one model after the other (on a GPU, one's replies executed beside the next one's generation): the
    few-shot base asks the base's server; with `retrieved` (the repository
    tasks' tracks with retrieval), each model also on those ("base + retrieval"); each of eval.artifacts on the
    general benchmarks alone ("fine-tuned (w4a16)")."""
    from ..serve import artifact_dir, served_model_dir

    e = cfg.eval
    targets = {"fine-tuned": e.endpoint or served_model_dir(cfg)}
    if e.compare_base and not e.endpoint:
        targets["base"] = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    # label → (the model it asks, the examples it is shown first)
    views = {"fine-tuned": ("fine-tuned", None)}
    if "base" in targets:
        views |= {"base": ("base", None)} | ({shots.label: ("base", shots)} if shots else {})
    shown = {
        label: [r | {"messages": with_shots(s, r["messages"], r.get("task"), r.get("language"))} for r in rows]
        for label, (_, s) in views.items()
    }
    wanted = e.heldout_loss and not e.endpoint  # an endpoint's weights are not ours to load
    # served: each model's loss in-process before any server starts (no GPU shared with vLLM)
    losses = {
        label: heldout_losses(lambda d=targets[t], rs=shown[label]: losses_of(d, rs), label)
        if wanted and not e.local
        else None
        for label, (t, _) in views.items()
    }
    measured: dict[str, tuple[dict, list[dict]]] = {}
    with ExecutionQueue.for_this_machine(e.exec_workers) as queue:
        for name, target in targets.items():
            with _generator(cfg, name, target, out) as gen:
                for label, (_, s) in ((lb, v) for lb, v in views.items() if v[0] == name):
                    loss = losses[label]
                    if wanted and e.local:  # on the generator's own model, loaded once
                        loss = heldout_losses(
                            lambda rs=shown[label]: example_losses(gen.model, gen.tokenizer, rs), label
                        )
                    measured[label] = measure(cfg, gen, tracks, rows, out, label, loss, s, queue=queue)
                if retrieved:  # the same model again on the repository tasks alone, shown what retrieval finds
                    lb = name + LABEL
                    measured[lb] = measure(cfg, gen, retrieved, [], out, lb, timed=False, queue=queue)
        general = [t for t in tracks if not t.benchmark.startswith("own-")]
        for kind in e.artifacts if general and not e.endpoint else ():  # what quantizing cost the exported model
            label = helped.artifact_label(kind)
            with _generator(cfg, label, artifact_dir(cfg, kind, "eval.artifacts"), out) as gen:
                measured[label] = measure(cfg, gen, general, [], out, label, timed=False, queue=queue)
        return queue.results(measured)


@contextmanager
def _generator(cfg: Config, name: str, target, out: Path):
    """The generator that asks `target`: the endpoint given, the model in-process, or a server started
    for it (and stopped after)."""
    from ..serve import server_for, triton_server_for

    e = cfg.eval
    if e.endpoint:
        yield EndpointGenerator(e.endpoint, cfg.serve.served_name)
    elif e.local:
        yield LocalGenerator(target)
    elif cfg.serve.backend == "triton":
        with triton_server_for(cfg, repo=_triton_repo(cfg, name, target, out)) as server:
            yield TritonGenerator(server.url, server.served_name)
    else:
        with server_for(cfg, target) as server:
            yield EndpointGenerator(server.url, server.served_name)


def _triton_repo(cfg: Config, label: str, model_dir, out: Path) -> Path | None:
    """The Triton model serving `label`: the export's for the fine-tuned model; for the base, one
    written here with the export's engine and length."""
    if label != "base":
        return None
    from ..export.triton import write_triton_repo

    exported = read_record(cfg.stage_dir("export"))["metrics"]
    return write_triton_repo(
        out / "triton_base",
        "base",
        model_dir,
        exported.get("triton_engine", "transformers"),
        exported.get("triton_max_len", 2048),
    )


def without_canary(tracks: list[benchmark.Track], canary: dict | None) -> list[benchmark.Track]:
    """HumanEval(-X) without the tasks the training's canary chose its checkpoint on (in every language:
    they are the same problems); the report names them."""
    if not canary:
        return tracks
    chosen = {t.rsplit("/", 1)[-1] for t in canary["tasks"]}
    for t in tracks:
        if t.benchmark in ("humaneval", "humaneval-x"):
            t.problems = [p for p in t.problems if p["task_id"].rsplit("/", 1)[-1] not in chosen]
            t.canary = sorted(canary["tasks"], key=lambda i: int(i.rsplit("/", 1)[-1]))
    return tracks


def _retrieved(e, tracks: list[benchmark.Track], data_outputs: dict) -> list[benchmark.Track]:
    """The repository tasks' tracks asked with retrieval (eval.retrieval_k), or none."""
    if not e.retrieval_k or not data_outputs.get("library"):
        return []
    return with_retrieval(tracks, Path(data_outputs["library"]), e.retrieval_k, e.retrieval_tokens)


def _shots(e, data_outputs: dict) -> FewShot | None:
    """What the few-shot base is shown (eval.few_shot): None without a base to ask, or where the data
    stage offered no training examples (the cpt format), which is logged."""
    if not e.few_shot or not e.compare_base or e.endpoint:
        return None
    if not data_outputs.get("shots"):
        log.info(
            "the base shown %d examples is not measured: the data stage wrote no training examples to show", e.few_shot
        )
        return None
    return FewShot.read(data_outputs["shots"], e.few_shot)


def _details(tracks, rows: list[dict], found: dict, shots, train: dict | None, data: dict) -> dict:
    """The report's details: each model's measures, the few-shot examples, training, "did it help"."""
    measured = {m: measures for m, (measures, _) in found.items()}
    asked = {("generate", t.language) for t in tracks} | {(r.get("task"), r.get("language")) for r in rows}
    details = dict(measured) | ({"few_shot": shots.summary(asked)} if shots else {})
    details["answer_form"] = data["metrics"].get("answer_form", "body")
    if train:
        details["training"] = {
            k: train[k]
            for k in (
                "steps",
                "first_train_loss",
                "final_train_loss",
                "final_grad_norm",
                "tokens_seen",
                "train_runtime_s",
                "peak_gpu_memory_gib",
            )
            if k in train
        }
        details["training"]["pairs_by_language"] = data["metrics"].get("pairs_by_language", {})
    details["helped"] = helped.lines({m: scored for m, (_, scored) in found.items()}, language_rows(details))
    return details


def _outputs(out: Path, measured: dict) -> dict:
    """The report in three forms, and every sample, for people to judge (ferrylm review)."""
    outputs = {name: str(out / f"report.{name}") for name in ("md", "html", "json")}
    for label, d in measured.items():
        outputs[f"heldout:{label}"] = str(out / heldout_file(label))
        outputs.update(
            {
                f"samples:{label}:{s['benchmark']}/{s['language']}": str(
                    out / benchmark.results_file(s["benchmark"], s["language"], label)
                )
                for s in d["benchmarks"]
                if "not_measured" not in s
            }
        )
    return outputs


@locked_stage("eval")
def run_eval(cfg: Config) -> StageRecord:
    e = cfg.eval
    criteria = load_criteria(e.criteria)  # a bad criteria file fails before any server starts
    use_api_key(os.environ.get(cfg.serve.api_key_env))  # the servers it starts (serve.*) ask for it
    data = read_record(cfg.stage_dir("data"))
    tracks, no_task = benchmark.with_tasks(benchmark.tracks(e, data["outputs"]))  # so does a benchmark's missing data
    out = cfg.stage_dir("eval")
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the programs under test run as another uid and must not read our files
    record = StageRecord("eval", cfg.digest())
    rows = heldout.select(read_jsonl(data["outputs"]["eval_prompts"]), e.bleu_limit)
    train, history = _training(cfg)
    tracks = without_canary(tracks, (train or {}).get("canary"))
    tracks = benchmark.asked_for(tracks, data["metrics"].get("answer_form", "body"))
    shots = _shots(e, data["outputs"])
    found = measure_models(cfg, tracks, rows, out, shots, _retrieved(e, tracks, data["outputs"]))
    measured = {m: measures for m, (measures, _) in found.items()}
    labels = ["fine-tuned", "base"] if (e.compare_base and not e.endpoint) or train else ["fine-tuned"]
    labels += [m for m in measured if m not in labels]  # the few-shot base
    models = with_pass_at_1_lost({m: criteria_values(measured.get(m), train, m) for m in labels})
    criteria = per_track(criteria, {t.key: t.title for t in tracks})
    details = _details(tracks, rows, found, shots, train, data) | ({"own_code_gave_none": no_task} if no_task else {})
    if not e.retrieval_k and any(t.benchmark.startswith("own-") for t in tracks):
        details["retrieval_off"] = True  # the report says where the retrieval columns are measured
    if not e.few_shot and "base" in measured:
        details["few_shot_off"] = True  # and the few-shot base's
    report = _write(cfg, criteria, models, details, history)
    record.outputs = _outputs(out, measured)
    record.metrics = {"models": report["models"], "failed_gates": report["failed_gates"]}
    record.finish(out)
    log.info("report: %s", out / "report.md")
    failed = gate_failures(report["failed_gates"])
    if failed and e.enforce_gates:
        raise GateFailed(
            f"gating criteria failed: {', '.join(failed)} "
            f"(report: {out / 'report.md'}; eval.enforce_gates=false reports without failing)"
        )
    return record
