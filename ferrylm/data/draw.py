"""Which functions of the user's repositories train and which are held out: the draw (data.max_pairs), the
held-out functions (data.holdout_functions) among those the repositories' own tests name, documented or not, their
near duplicates dropped, and the functions the draw left that retrieval may still search."""

from __future__ import annotations

import random

from ..source.pairs import Pair
from ..source.test_files import is_test_file
from .file_examples import SPAN_LANGUAGES, FileSpans, in_repo
from .holdout import HeldOutFunctions, drawable, drawn


def chosen_pairs(
    d, pairs: list, held: set, roots, stats: dict, tested: dict, undocumented: list
) -> tuple[list, HeldOutFunctions]:
    """The pairs drawn (data.max_pairs), without the training repositories' test files and the near
    duplicates of their held-out functions (data.holdout_functions), and those held-out functions (`tested`:
    what each repository's tests name, holdout.drawable), drawn among the pairs and the `undocumented` functions
    of the user's own repositories alike."""
    random.Random(d.seed).shuffle(pairs)
    # the held-out functions of the user's own repositories are all kept, whatever max_pairs draws
    own = {
        id(p)
        for p, ref in pairs
        if d.holdout_functions
        and ref.repo in roots
        and ref.repo not in held
        and drawable(p.source, ref.repo, tested)
        and drawn(d.seed, p.source, d.holdout_functions)
    }
    if d.max_pairs:
        pairs = [x for x in pairs if id(x[0]) in own] + [x for x in pairs if id(x[0]) not in own][: d.max_pairs]
    if d.holdout_functions:  # a training repository's tests would show its held-out functions' behaviour
        kept_pairs = [(p, ref) for p, ref in pairs if ref.repo in held or not is_test_file(in_repo(ref, roots))]
        stats["test_file_pairs_dropped"] = len(pairs) - len(kept_pairs)
        pairs = kept_pairs
    kept = HeldOutFunctions(
        pairs + undocumented, held, d.holdout_functions, d.seed, d.near_dedupe_threshold, d.minhash_perms, tested
    )
    if d.holdout_functions:
        near = {
            p.source for p, ref in pairs if ref.repo not in held and p.source not in kept.sources and kept.near(p.body)
        }
        pairs = [(p, ref) for p, ref in pairs if p.source not in near]
        stats.update(
            held_out_functions=len(kept.sources),
            held_out_undocumented=len(kept.sources & {p.source for p, _ in undocumented}),
            pairs_near_held_out=len(near),
        )
    return pairs, kept


def undocumented(spans: FileSpans, docs, held: set, roots: dict) -> list:
    """(Pair, ref) of each function without a doc comment in the user's own training repositories (not their
    tests): with the file shown, a function needs no doc comment to be asked, so it may be held out too."""
    out = []
    for doc in docs:
        if doc.ref.repo not in roots or doc.ref.repo in held or doc.ref.language not in SPAN_LANGUAGES:
            continue
        if is_test_file(in_repo(doc.ref, roots)):
            continue
        documented = {p.source for p in doc.pairs}
        out += [(Pair(f.id, f.prompt, f.body), doc.ref) for f in spans.of(doc.ref).values() if f.id not in documented]
    return out


def undrawn_own(every: list, chosen: list, held: set, kept: HeldOutFunctions, roots: dict, drop_tests: bool) -> list:
    """The training repositories' functions data.max_pairs did not draw, as the draw would have kept them
    (no held-out function nor a near duplicate of one; with held-out functions, no test file): a team's
    retrieval searches its whole repositories, not a sample of them."""
    seen = {p.source for p, _ in chosen}
    return [
        (p, ref)
        for p, ref in every
        if ref.repo in roots
        and ref.repo not in held
        and p.source not in seen
        and p.source not in kept.sources
        and not (drop_tests and is_test_file(in_repo(ref, roots)))
        and not kept.near(p.body)
    ]


def held_out_names(pairs, sources: set[str], roots: dict) -> dict[str, list[str]]:
    """repository → its held-out functions as `path in repository::name`."""
    functions: dict[str, list[str]] = {}
    for p, ref in pairs:
        if p.source in sources:
            functions.setdefault(ref.repo, []).append(f"{in_repo(ref, roots)}::{p.source.split('::', 1)[1]}")
    return functions
