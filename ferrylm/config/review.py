"""`review`: the human verdict's page and who may vote."""

from __future__ import annotations

from pydantic import Field

from .base import _Section


class ReviewConfig(_Section):
    samples: int = Field(60, gt=0)
    """items drawn once from the eval stage's outputs"""
    seed: int = 0
    """the draw and each item's A/B order"""
    required: bool = False
    """The seed's human criterion (> 80 % judged correct) gates only when this is set; until votes exist the
    report says "not measured"."""
    host: str = "127.0.0.1"
    """loopback unless asked (then reviewers must be invited)"""
    port: int = Field(8765, gt=0, lt=65536)
    """Port of the review page."""
    reviewers: list[str] = Field(default_factory=list)
    """Invited reviewers: one link each, with a token only that reviewer's votes are stored under."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Names the page may be reached by besides the bound address and this machine's own (a DNS alias)."""
