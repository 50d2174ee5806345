"""Held-out examples of held-out repositories, scored per example so two models can be paired.

Two tasks (the data stage's `task` field):
- explain (code understanding): the reply's first paragraph against the doc comment's summary,
  smoothed BLEU-4 (CodeXGLUE code-to-text; smooth_bleu.py) — the seed's 代码理解 BLEU;
- generate (code generation): the reply's code block against the body (or the whole function, where
  the data stage's answer_form asked for it), sacreBLEU and chrF (corpus and per sentence), and
  whether the reply kept the asked format: one code block, the signature not written again (or
  written, for the whole function).
Rows of other formats (cpt, the user's chat files) have no task and are scored as generation.
"""

from __future__ import annotations

import re

import sacrebleu

from ...prompts import code_block_closed, extract_code
from ...source.pairs import called_name
from ..progress import pool_map
from ..replies.summary import summary_from_reply
from . import smooth_bleu
from .few_shot import with_shots

TASKS = ("explain", "generate")
EXPLAIN_MAX_TOKENS = 96  # a summary is one or two sentences; a reply past this has not stopped


def task_of(row: dict) -> str:
    return row.get("task", "generate")


def select(rows: list[dict], limit: int) -> list[dict]:
    """The first `limit` rows of each task, in file order (the data stage's seeded order), from the
    held-out repositories (the held-out functions of training repositories are scored by running
    their tests: eval/repo/)."""
    seen: dict[str, int] = {}
    out = []
    for r in rows:
        if r.get("split") == "functions":
            continue
        t = task_of(r)
        if seen.get(t, 0) < limit:
            seen[t] = seen.get(t, 0) + 1
            out.append(r)
    return out


def _signature_line(row: dict) -> str | None:
    """The prompt's declaration line (where the function's name meets its parameters)."""
    name = called_name((row.get("source") or "").rsplit("::", 1)[-1])
    for line in (row.get("prompt_code") or "").splitlines():
        s = line.strip()
        if name and f"{name}(" in s and not s.startswith(("#", "//", "*", "/*", '"""', "'''")):
            return s
    return None


def kept_format(reply: str, row: dict) -> bool:
    """One fenced block (closed or running to the end) and the function's signature not written again
    (asked for the body) or written (asked for the whole function: the row's answer_form)."""
    if len(re.findall(r"^\s*```", reply, re.M)) > 2:
        return False
    if "```" not in reply:
        return False
    sig = _signature_line(row)
    if not sig:
        return True
    written = any(line.strip() == sig for line in extract_code(reply).splitlines())
    return written == (row.get("answer_form") == "function")


def generate_replies(generator, rows: list[dict], max_tokens: int, concurrency: int, shots=None) -> list[str]:
    """One greedy reply per row; `shots` (few_shot.FewShot): training examples of the row's task and
    language shown first, as earlier turns."""

    def one(row: dict) -> str:
        messages = with_shots(shots, row["messages"], row.get("task"), row.get("language"))
        if task_of(row) == "explain":
            return generator.chat(messages, min(max_tokens, EXPLAIN_MAX_TOKENS))[0]
        return generator.chat(messages, max_tokens, until=code_block_closed)[0]

    return pool_map(one, rows, concurrency)


def score_rows(rows: list[dict], replies: list[str]) -> list[dict]:
    """One scored record per row: its output (what was scored) and its per-example numbers."""
    chrf, bleu = sacrebleu.CHRF(), sacrebleu.BLEU(effective_order=True)
    out = []
    for row, reply in zip(rows, replies):
        rec = {
            "source": row.get("source"),
            "language": row.get("language"),
            "task": task_of(row),
            "messages": row["messages"],
            "reference": row["reference"],
            "reply": reply,
        }
        if rec["task"] == "explain":
            rec["output"] = summary_from_reply(reply)
            rec["smoothed_bleu4"] = 100 * smooth_bleu.sentence_score(rec["output"], row["reference"])
        else:
            rec["output"] = extract_code(reply)
            rec["bleu"] = bleu.sentence_score(rec["output"], [row["reference"]]).score
            rec["chrf"] = chrf.sentence_score(rec["output"], [row["reference"]]).score
            rec["format_kept"] = int(kept_format(reply, row)) if "prompt_code" in row else None
        out.append(rec)
    return out


def summarize(scored: list[dict]) -> dict:
    """Per task: the corpus scores a reader knows (smoothed BLEU-4 0–100; sacreBLEU and chrF of the
    bodies), the format rate and the example count."""
    out: dict = {}
    explain = [r for r in scored if r["task"] == "explain"]
    if explain:
        out["explain"] = {
            "examples": len(explain),
            "smoothed_bleu4": smooth_bleu.corpus_score(
                [r["output"] for r in explain], [r["reference"] for r in explain]
            ),
            "signature": smooth_bleu.SIGNATURE,
            # a difference in BLEU can be one of length: the reader sees both
            "mean_words": sum(len(r["output"].split()) for r in explain) / len(explain),
            "reference_mean_words": sum(len(r["reference"].split()) for r in explain) / len(explain),
        }
    gen = [r for r in scored if r["task"] == "generate"]
    if gen:
        hyps, refs = [r["output"] for r in gen], [[r["reference"] for r in gen]]
        bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
        kept = [r["format_kept"] for r in gen if r.get("format_kept") is not None]
        out["generate"] = {
            "examples": len(gen),
            "sacrebleu": bleu.corpus_score(hyps, refs).score,
            "chrf": chrf.corpus_score(hyps, refs).score,
            "format_kept": sum(kept) / len(kept) if kept else None,
            "signature": f"{bleu.get_signature()}; {chrf.get_signature()}",
        }
    return out
