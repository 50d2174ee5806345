"""Functions of the training repositories held out as well (data.holdout_functions).

A team mostly asks the model about the repositories it trained on, so a seeded share of their
functions is held out too: their examples go to the eval split, training functions whose bodies
nearly duplicate a held-out body are dropped (MinHash of word 5-grams, the data stage's near-dedupe),
and a training repository's test files give no example (they would show the held-out functions'
expected behaviour). In a repository with tests, the share is drawn among the functions its test files
name (the words they hold): only those can become tasks of the eval's executed Pass@1, so no held-out
function is wasted on one no test can check.
"""

from __future__ import annotations

import hashlib
import re

from ..source.pairs import called_name
from .clean import MinHasher, NearDuplicates


def drawn(seed: int, source: str, share: float) -> bool:
    """Whether the function `source` is among the held-out share (a seeded hash: stable across runs)."""
    digest = hashlib.sha256(f"{seed}:function:{source}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def words_in(text: str) -> set[str]:
    """The identifiers a test file holds (the functions it may call)."""
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def drawable(source: str, repo: str, tested: dict[str, set[str]]) -> bool:
    """Whether a function may be held out: any, in a repository without tests here; else one its tests name."""
    return repo not in tested or called_name(source.split("::", 1)[-1]) in tested[repo]


class HeldOutFunctions:
    """The held-out functions of the training repositories, and the near-duplicate check against them."""

    def __init__(
        self,
        pairs: list,
        held_repos: set[str],
        share: float,
        seed: int,
        threshold: float,
        perms: int,
        tested: dict[str, set[str]] | None = None,
    ):
        """`tested`: repository → the words its test files hold (words_in), for the repositories whose
        tests the eval runs; their functions are drawn among those the words name."""
        self.sources = {
            p.source
            for p, ref in pairs
            if ref.repo not in held_repos
            and share
            and drawable(p.source, ref.repo, tested or {})
            and drawn(seed, p.source, share)
        }
        self._hasher = MinHasher(perms)
        self._index = NearDuplicates(threshold, perms)
        for p, _ in pairs:
            if p.source in self.sources:
                self._index.seen(self._hasher.signature(p.body))

    def near(self, body: str) -> bool:
        """Whether a training body nearly duplicates a held-out one."""
        return bool(self.sources) and self._index.near(self._hasher.signature(body))
