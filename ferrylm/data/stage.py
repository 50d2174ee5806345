"""`run_data(cfg)`: the data stage's entry function and its helpers (what the stage does: the
package's docstring)."""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ..config import Config
from ..diskspace import out_of_space
from ..errors import FerryError
from ..log import get_logger
from ..manifest import StageRecord, locked_stage, sha256_file, temporary_name, write_json_atomic, write_text_atomic
from ..models import load_tokenizer, resolve_model_path
from ..prompts import IGNORE_INDEX, render_messages, task_turns
from ..source import library
from . import cpt, draw, repo_files
from .collect import CleanStats, collect
from .corpus import ScanStats, repository_roots
from .encode import ArrowRows, Packer
from .file_examples import FileShown, FileSpans, tested_words
from .formats import read_conversations
from .holdout import drawn
from .shots import ShotPool
from .stats import write_report

LIBRARY = "library.sqlite"  # the training functions, searchable (the eval's retrieval column)
# outputs only some corpora give: a corpus of repositories (their tests), format=sft (the library)
OPTIONAL = {"repositories": "repositories.json", "library": LIBRARY}
log = get_logger("data")


class EmptyCorpus(FerryError, ValueError):
    pass


def eval_units(units: list[str], fraction: float, seed: int) -> set[str]:
    """The held-out units (repositories, or rows for chat files): the ceil(fraction·n) whose seeded
    hash is smallest — deterministic, at least one, never all."""
    if len(units) < 2:
        raise EmptyCorpus(f"data: {len(units)} repository/unit found; a train/eval split needs at least 2")
    ranked = sorted(set(units), key=lambda u: hashlib.sha256(f"{seed}:{u}".encode()).digest())
    n = min(len(ranked) - 1, max(1, math.ceil(fraction * len(ranked))))
    return set(ranked[:n])


class _Writer:
    """One split's Arrow file (packed or not), the lengths for the histogram, and beside the file what each
    row holds (`<split>_rows.jsonl`, a line a row: its tokens and its examples' repository, function and
    task), so a training step the trainer cannot finish names its rows."""

    def __init__(self, path: Path, pack_len: int | None):
        cols = ["input_ids", "labels"] + (["position_ids"] if pack_len else [])
        self.rows = ArrowRows(path, cols)
        self.about_path = path.with_name(f"{path.stem}_rows.jsonl")
        self.about_tmp = temporary_name(self.about_path)
        self._about = open(self.about_tmp, "w")
        self.packer = Packer(pack_len) if pack_len else None
        self.example_lengths: list[int] = []
        self.examples = 0
        self.targets = 0
        self.without_targets = 0

    def add(self, ids, labels, about: dict | None = None) -> None:
        ids, labels = np.asarray(ids, dtype=np.int32), np.asarray(labels, dtype=np.int32)
        targets = int(np.count_nonzero(labels[1:] != IGNORE_INDEX))  # the first token is predicted by nothing
        if targets == 0:  # nothing to learn; alone in a micro-batch its loss would be 0 / 0
            self.without_targets += 1
            return
        self.examples += 1
        self.targets += targets
        self.example_lengths.append(len(ids))
        if self.packer is None:
            self._write({"input_ids": ids, "labels": labels, "about": [about or {}]})
        else:
            for row in self.packer.add(ids, labels, about or {}):
                self._write(row)

    def _write(self, row: dict) -> None:
        self.rows.write(row)
        self._about.write(json.dumps({"tokens": len(row["input_ids"]), "examples": row["about"]}) + "\n")

    def add_all(self, rows) -> None:
        """Rows of (ids, labels) or (ids, labels, about)."""
        for row in rows:
            self.add(*row)

    def close(self) -> Path:
        if self.packer is not None:
            for row in self.packer.finish():
                self._write(row)
        self._about.close()
        self.about_tmp.replace(self.about_path)
        return self.rows.close()


@locked_stage("data")
def run_data(cfg: Config) -> StageRecord:
    d = cfg.data
    t0 = time.perf_counter()
    out = cfg.stage_dir("data")
    record = StageRecord("data", cfg.digest())
    model_dir = resolve_model_path(cfg.model.path, cfg.model.cache_dir)
    tokenizer = load_tokenizer(model_dir)
    out.mkdir(parents=True, exist_ok=True)
    pack_len = d.max_seq_len if (d.pack or d.format == "cpt") else None
    held_out: list[dict] = []
    shots = ShotPool()  # training examples the eval may show the base model (eval.few_shot)
    stats: dict = {"format": d.format, **({"answer_form": d.answer} if d.format == "sft" else {})}
    for name in OPTIONAL.values():  # written again where this run's corpus gives them
        (out / name).unlink(missing_ok=True)

    def partial() -> None:
        # by name, not through `writers`: an interrupt can land before the writers are all bound;
        # the stage lock makes every such file in `out` this run's own
        for tmp in [*out.glob(".*.arrow.*.tmp"), *out.glob(".*_rows.jsonl.*.tmp")]:
            tmp.unlink(missing_ok=True)

    try:
        # a full disk: the split already published goes too (its record is withdrawn; it only takes room)
        with out_of_space(
            "the data stage's Arrow rows",
            out,
            lambda: [partial(), *(p.unlink(missing_ok=True) for p in out.glob("*.arrow"))],
        ):
            paths = _write_rows(cfg, tokenizer, out, pack_len, held_out, stats, shots)
    except BaseException:
        partial()
        raise
    write_text_atomic(out / "eval.jsonl", "".join(json.dumps(row) + "\n" for row in held_out))

    stats["elapsed_s"] = time.perf_counter() - t0
    stats["mb_per_s"] = stats.get("bytes_seen", 0) / 1e6 / stats["elapsed_s"]
    record.outputs = {
        **{k: str(paths[k]) for k in ("train", "eval", "train_rows")},  # train_rows: what a failed step names
        "eval_prompts": str(out / "eval.jsonl"),
        **{key: str(out / name) for key, name in OPTIONAL.items() if (out / name).is_file()},
        **({"shots": str(shots.write(out / "shots.jsonl"))} if shots.rows else {}),
        **write_report(out, stats, paths.pop("lengths")),
    }
    record.inputs = {f"source:{s}": "tree" for s in d.sources}
    if d.manifest:
        record.inputs["manifest"] = sha256_file(d.manifest)
    for f in d.jsonl_files if d.format == "jsonl" else []:
        record.inputs[f"jsonl:{f}"] = sha256_file(f)
    tok_json = Path(model_dir) / "tokenizer.json"
    record.inputs["tokenizer"] = sha256_file(tok_json) if tok_json.is_file() else str(model_dir)
    record.metrics = stats
    log.info(
        "data: %s examples %d train / %d eval, %.1f s",
        d.format,
        stats["train_examples"],
        stats["eval_examples"],
        stats["elapsed_s"],
    )
    return record.finish(out)


def _write_rows(
    cfg: Config, tokenizer, out: Path, pack_len: int | None, held_out: list[dict], stats: dict, shots: ShotPool
) -> dict:
    """Every example into train.arrow / eval.arrow (published by rename once whole), its counts into `stats`."""
    writers = {s: _Writer(out / f"{s}.arrow", pack_len) for s in ("train", "eval")}
    if cfg.data.format == "jsonl":
        _from_chat_files(cfg, tokenizer, writers, held_out, stats, shots)
    else:
        _from_code(cfg, tokenizer, writers, held_out, stats, shots)
    if writers["train"].examples == 0 or writers["eval"].examples == 0:
        raise EmptyCorpus(
            f"data: the split left train={writers['train'].examples} "
            f"eval={writers['eval'].examples} examples; add sources or change data.eval_fraction"
        )
    paths = {s: w.close() for s, w in writers.items()}
    paths.update({f"{s}_rows": w.about_path for s, w in writers.items()})
    for s, w in writers.items():
        stats[f"{s}_examples"] = w.examples
        stats[f"{s}_tokens"] = w.rows.tokens
    stats["train_target_tokens"] = writers["train"].targets
    stats["rows_without_targets"] = sum(w.without_targets for w in writers.values())
    if pack_len:
        w = writers["train"]
        stats.update(packed=True, packed_rows=w.rows.rows, pack_fill=w.rows.tokens / max(1, w.rows.rows * pack_len))
    return {**paths, "lengths": writers["train"].example_lengths}


def _from_code(cfg: Config, tokenizer, writers: dict, held_out: list[dict], stats: dict, shots: ShotPool) -> None:
    d = cfg.data
    scan, clean = ScanStats(), CleanStats()
    t0 = time.perf_counter()
    docs = list(collect(d, scan, clean, want_pairs=d.format == "sft"))
    stats["scan_clean_s"] = time.perf_counter() - t0
    stats.update(scan.as_dict())
    stats.update(clean.as_dict())
    if not docs:
        raise EmptyCorpus(
            f"data.sources: no code files passed the filters in {d.sources or d.manifest} "
            f"(seen {scan.seen}, dropped {dict(scan.dropped)})"
        )
    held = eval_units([doc.ref.repo for doc in docs], d.eval_fraction, d.seed)
    repos = sorted({doc.ref.repo for doc in docs})
    stats["train_repositories"] = len(repos) - len(held)
    stats["eval_repositories"] = len(held)
    write_json_atomic(
        cfg.stage_dir("data") / "splits.json",
        {"train": [r for r in repos if r not in held], "eval": [r for r in repos if r in held]},
    )
    roots = repository_roots(d)  # where each repository's tests can run (the eval's executed Pass@1)
    functions: dict[str, list[str]] = {}
    if d.format == "sft":
        functions = _sft(cfg, tokenizer, docs, held, writers, held_out, stats, roots, shots)
    else:
        cpt.write_examples(cfg.data, tokenizer, docs, held, writers, held_out, stats)
    write_json_atomic(
        cfg.stage_dir("data") / "repositories.json",
        [
            {
                "name": r,
                "split": "eval" if r in held else "train",
                **roots[r],
                "held_out_functions": sorted(functions.get(r, [])),
            }
            for r in repos
            if r in roots
        ],
    )


def _sft(cfg, tokenizer, docs, held, writers, held_out, stats, roots, shots) -> dict[str, list[str]]:
    """Per function with a doc comment, an example of each task its seeded draw gives (data.tasks).
    Returns the held-out functions of training repositories (data.holdout_functions), by repository,
    as `path in repository::name`."""
    d = cfg.data
    pairs = [(p, doc.ref) for doc in docs for p in doc.pairs]
    stats["pairs_extracted"] = len(pairs)
    stats["pairs_by_language"] = dict(Counter(ref.language for _, ref in pairs))
    if not pairs:
        raise EmptyCorpus(
            f"data.sources: {len(docs)} code files but no function with a doc comment "
            f"and a {d.min_body_lines}–{d.max_body_lines} line body"
        )
    every = list(pairs)
    spans = FileSpans(docs, d)
    undocumented = draw.undocumented(spans, docs, held, roots) if d.holdout_functions else []
    pairs, kept = draw.chosen_pairs(d, pairs, held, roots, stats, tested_words(held, roots), undocumented)
    undrawn = draw.undrawn_own(every, pairs, held, kept, roots, bool(d.holdout_functions))
    stats["library_functions"] = _write_library(cfg, pairs + undrawn, held, kept.sources)
    too_long, no_summary, examples = 0, 0, Counter()
    shown = FileShown(spans, kept, d, roots)
    # a share of the held-out functions only validates (the checkpoint is chosen on them), never reported as a task
    validation = {s for s in kept.sources if drawn(d.seed, f"validation:{s}", d.validation_functions)}
    for p, ref in pairs:
        lang = ref.language
        coin = random.Random(f"{d.seed}:{p.source}")
        for task, share in d.tasks.items():
            if coin.random() >= share:
                continue
            if task == "explain" and not p.summary:
                no_summary += 1
                continue
            split = "eval" if ref.repo in held or p.source in kept.sources else "train"
            turns = shown.turns(p, ref) if task == "file" else task_turns(task, p, lang, d.answer)
            if turns is None or (task == "file" and split == "eval"):
                continue  # a held-out function's file-shown question is the eval's own-code task
            messages = [{"role": "user", "content": turns[0]}, {"role": "assistant", "content": turns[1]}]
            ex = render_messages(tokenizer, messages)
            if len(ex["input_ids"]) > d.max_seq_len:
                too_long += 1
                continue
            reported = split == "eval" and p.source in kept.sources and p.source not in validation
            if not reported:  # a reported task's rows never choose the checkpoint
                writers[split].add(ex["input_ids"], ex["labels"], _about(p, ref, task))
            examples[f"{split}/{task}/{lang}"] += 1
            if split == "eval" and p.source not in validation:
                held_out.append(_held_out_row(p, lang, task, messages, d.answer, ref.repo in held))
            elif task != "file":  # the few-shot column shows the short questions
                shots.offer(
                    task, lang, messages, len(ex["input_ids"]), source=p.source, prompt_code=p.prompt_code, body=p.body
                )
    if d.repo_files:  # the training repositories' own files (data/repo_files.py)
        chosen = repo_files.chosen(docs, held, roots, d.repo_files, d.seed)
        writers["train"].add_all(repo_files.rows(chosen, shown, roots, tokenizer, d, stats))
    stats["pairs_too_long"] = too_long
    stats["file_examples_without_span"] = shown.missing
    stats["functions_without_summary"] = no_summary
    stats["examples_by_task"] = dict(sorted(examples.items()))
    stats["validation_functions"] = len(validation)
    return draw.held_out_names(pairs + undocumented, kept.sources - validation, roots)


def _about(p, ref, task: str) -> dict:
    """A training row's description (train_rows.jsonl): what a failed step names."""
    return {"repository": ref.repo, "function": p.source, "task": task, "language": ref.language}


def _held_out_row(p, language: str, task: str, messages: list, form: str, held_repo: bool) -> dict:
    """A held-out example as the eval reads it (eval_prompts.jsonl)."""
    return {
        "source": p.source,
        "language": language,
        "task": task,
        "messages": messages[:1],
        "answer": messages[1]["content"],
        "reference": _reference(task, p, form),
        "answer_form": form,
        "prompt_code": p.prompt_code,
        "split": "repositories" if held_repo else "functions",
    }


def _reference(task: str, pair, form: str) -> str:
    """What a held-out reply is scored against: the summary, the body, or the whole function."""
    if task == "explain":
        return pair.summary
    return pair.prompt_code + pair.body if form == "function" else pair.body


def _write_library(cfg, pairs, held: set, held_functions: set[str]) -> int:
    """The training repositories' functions (whole), searchable: what the eval's retrieval column may show;
    never a held-out repository's nor a held-out function."""
    return library.write(
        cfg.stage_dir("data") / LIBRARY,
        (
            (p.source, ref.language, p.prompt_code + p.body, ref.repo)
            for p, ref in pairs
            if ref.repo not in held and p.source not in held_functions
        ),
    )


def _from_chat_files(cfg, tokenizer, writers, held_out, stats, shots) -> None:
    d = cfg.data
    dropped = Counter()
    rows = list(read_conversations(d.jsonl_files, d.jsonl_format, dropped))
    if not rows:
        raise EmptyCorpus(f"data.jsonl_files: no usable rows in {d.jsonl_files} (dropped {dict(dropped)})")
    held = eval_units([key for key, _ in rows], d.eval_fraction, d.seed)
    for key, messages in rows:
        try:
            ex = render_messages(tokenizer, messages)
        except ValueError:
            dropped["template_mismatch"] += 1
            continue
        if len(ex["input_ids"]) > d.max_seq_len:
            dropped["too_long"] += 1
            continue
        split = "eval" if key in held else "train"
        writers[split].add(ex["input_ids"], ex["labels"], {"conversation": key})
        if split == "train" and [m["role"] for m in messages] == ["user", "assistant"]:
            shots.offer(None, None, messages, len(ex["input_ids"]), source=key)
        elif split == "eval":
            last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
            held_out.append({"source": key, "messages": messages[:last], "reference": messages[last]["content"]})
    stats.update(rows_read=len(rows), rows_dropped=dict(dropped))
