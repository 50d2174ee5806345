"""`run_review(cfg)`: the review stage's entry function and its helpers (what the stage does: the
package's docstring)."""

from __future__ import annotations

import json

from ..config import Config
from ..log import get_logger
from ..manifest import read_record
from .sample import ReviewError, load_or_draw
from .store import Votes

log = get_logger("review")


def _paths(cfg: Config):
    d = cfg.stage_dir("review")
    return d / "items.json", d / "votes.sqlite"


def url(cfg: Config) -> str:
    return f"http://{cfg.review.host}:{cfg.review.port}"


def run_review(cfg: Config) -> None:
    """Serve the review page until interrupted (the sample is drawn on the first start and kept)."""
    import uvicorn

    from ..serve.process import port_in_use
    from .app import make_app
    from .guard import Guard, invites, is_loopback, served_names

    r = cfg.review
    try:
        outputs = read_record(cfg.stage_dir("eval"))["outputs"]
    except FileNotFoundError:
        raise ReviewError(f"review: no finished eval stage in {cfg.run_dir}; run `ferrylm eval` first") from None
    items_file, votes_file = _paths(cfg)
    items = load_or_draw(items_file, outputs, r.samples, r.seed)
    if port_in_use(r.host, r.port):
        raise ReviewError(f"review.port: {r.host}:{r.port} is already in use; pick another with review.port=N")
    if not r.reviewers and not is_loopback(r.host):
        raise ReviewError(
            f"review.host: {r.host} opens the page to others; invite its reviewers (--invite alice,bob "
            "or review.reviewers) so that each vote is its reviewer's"
        )
    guard = Guard(
        r.port, served_names(r.host, r.allowed_hosts), invites(items_file.parent / "invites.json", r.reviewers)
    )
    votes = Votes(votes_file)
    log.info(
        "review: %d items, %d votes so far, at %s (Ctrl-C stops; votes are saved as they are cast)",
        len(items),
        len(votes.all()),
        url(cfg),
    )
    for token, name in guard.invited.items():
        print(f"ferrylm: {name}: {url(cfg)}/?token={token}", flush=True)
    print(
        f"ferrylm: review page at {url(cfg)}/"
        + (" (the links above, one per reviewer)" if guard.invited else "")
        + " — then `ferrylm report --config ...` puts the votes in the report",
        flush=True,
    )
    uvicorn.run(make_app(items, votes, guard), host=r.host, port=r.port, log_level="warning")


def human_verdict(cfg: Config) -> dict | None:
    """The votes so far, summarised (verdict.summarise), or None before any."""
    from .verdict import summarise

    items_file, votes_file = _paths(cfg)
    if not items_file.is_file() or not votes_file.is_file():
        return None
    return summarise(Votes(votes_file).all(), json.loads(items_file.read_text()), url(cfg))
