"""The team's own code as a benchmark of the seam: the held-out repositories' functions and the training
repositories' held-out functions, each run against its repository's own tests (own-code in eval.benchmarks; the data
stage's repositories.json). How a function becomes a task and a reply a body: ../repo/.
"""

from __future__ import annotations

import json
from pathlib import Path

from .benchmark import Track


def tracks(e, inputs: dict) -> list[Track]:
    """One track per split and language where the data stage's corpus had repositories."""
    if not inputs.get("repositories"):
        return []
    from ..repo.track import Asking  # tree-sitter and the sandbox: loaded only when asked
    from ..repo.track import tracks as repo_tracks

    return repo_tracks(Asking.of(e), json.loads(Path(inputs["repositories"]).read_text()))
