"""Scan → read → filter → scrub → dedupe, fanned out over worker processes, in a stable order.

Workers read and clean files and compute their MinHash signatures (and, for sft, their pairs);
the parent keeps the order of the scan, drops exact duplicates by content key and near-duplicates
through the LSH index, and counts everything it drops by reason.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from tqdm import tqdm

from ..config import DataConfig
from ..source.pairs import Pair, extract_pairs
from .clean import MinHasher, NearDuplicates, content_key, generated_or_minified, is_config_file, scrub_secrets
from .corpus import FileRef, ScanStats, cpp_headers, read_checked, trees, walk


@dataclass
class Doc:
    ref: FileRef
    text: str
    pairs: list[Pair] = field(default_factory=list)


@dataclass
class CleanStats:
    exact_duplicates: int = 0
    near_duplicates: int = 0
    secrets: Counter = field(default_factory=Counter)
    files_with_secrets: int = 0
    parse_failures: Counter = field(default_factory=Counter)  # files whose pairs could not be read, by reason

    def as_dict(self) -> dict:
        return {
            "exact_duplicates_removed": self.exact_duplicates,
            "near_duplicates_removed": self.near_duplicates,
            "secrets_scrubbed": dict(self.secrets),
            "files_with_secrets": self.files_with_secrets,
            "pair_extraction_failures": dict(self.parse_failures),
        }


_state: dict = {}


def _init(cfg: DataConfig, want_pairs: bool) -> None:
    _state.update(cfg=cfg, pairs=want_pairs, hasher=MinHasher(cfg.minhash_perms) if cfg.near_dedupe else None)


def _init_worker(cfg: DataConfig, want_pairs: bool) -> None:
    # A forked worker must die on the pool's SIGTERM, whatever handler its parent had installed: a
    # handler that raises inside the worker's result write is caught there and the worker blocks for
    # good (seen: a test process holding the serve stage's stop handler hung the data stage).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops the pool
    _init(cfg, want_pairs)


def _process(ref: FileRef):
    cfg = _state["cfg"]
    text, size, reason = read_checked(ref.path, cfg)
    if reason:
        return ref, size, reason, None
    if cfg.drop_generated:
        reason = generated_or_minified(text, cfg.max_line_chars, cfg.min_alnum_fraction)
        if reason:
            return ref, size, reason, None
    secrets = Counter()
    if cfg.scrub_secrets:
        text, secrets = scrub_secrets(text, is_config_file(ref.path))
    sig = _state["hasher"].signature(text) if _state["hasher"] else None
    pairs, failure = _pairs(text, ref, cfg) if _state["pairs"] else ([], None)
    return ref, size, None, (text, content_key(text) if cfg.exact_dedupe else None, sig, secrets, pairs, failure)


def _pairs(text: str, ref: FileRef, cfg: DataConfig) -> tuple[list[Pair], str | None]:
    """The file's pairs, or none and the reason its parser failed: one file never stops the stage
    (a deeply nested expression makes `ast` raise RecursionError, a parser may run out of memory)."""
    from ..source.pairs_ts import extract_pairs_ts, supported

    try:
        if ref.language == "python":
            return extract_pairs(text, ref.rel, cfg.min_body_lines, cfg.max_body_lines), None
        if supported(ref.language):
            return extract_pairs_ts(text, ref.rel, ref.language, cfg.min_body_lines, cfg.max_body_lines), None
    except Exception as e:  # noqa: BLE001 — counted by reason in the stats, never fatal
        return [], f"{ref.language}:{type(e).__name__}"
    return [], None


def worker_count(cfg: DataConfig) -> int:
    return cfg.workers or os.cpu_count() or 1


def collect(cfg: DataConfig, stats: ScanStats, clean: CleanStats, want_pairs: bool) -> Iterator[Doc]:
    refs = cpp_headers([ref for tree in trees(cfg) for ref in walk(tree, cfg, stats)])
    stats.seen = len(refs)
    seen_keys: set[bytes] = set()
    near = NearDuplicates(cfg.near_dedupe_threshold, cfg.minhash_perms) if cfg.near_dedupe else None
    workers = worker_count(cfg)
    ctx = mp.get_context("fork")
    pool = ctx.Pool(workers, initializer=_init_worker, initargs=(cfg, want_pairs)) if workers > 1 else None
    if pool is None:
        _init(cfg, want_pairs)
    results = pool.imap(_process, refs, chunksize=16) if pool else map(_process, refs)
    try:
        for ref, size, reason, payload in tqdm(
            results, total=len(refs), desc="scan+clean", unit="file", disable=None, mininterval=2
        ):
            stats.bytes_seen += size
            if reason:
                stats.dropped[reason] += 1
                continue
            text, key, sig, secrets, pairs, failure = payload
            if failure:
                clean.parse_failures[failure] += 1
            if key is not None:
                if key in seen_keys:
                    clean.exact_duplicates += 1
                    stats.dropped["exact_duplicate"] += 1
                    continue
                seen_keys.add(key)
            if near is not None and near.seen(sig):
                clean.near_duplicates += 1
                stats.dropped["near_duplicate"] += 1
                continue
            if secrets:
                clean.secrets.update(secrets)
                clean.files_with_secrets += 1
            stats.kept += 1
            stats.bytes_kept += size
            stats.by_language[ref.language] += 1
            stats.by_priority[ref.priority] += 1
            yield Doc(ref, text, pairs)
            if cfg.max_files and stats.kept >= cfg.max_files:
                return
    finally:
        if pool:
            pool.terminate()
