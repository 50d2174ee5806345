"""Who may read the review page and cast a vote.

- Every request must name the address served in its Host header (a page that rebinds its own DNS
  name to 127.0.0.1 is refused).
- A vote is JSON (415 otherwise: a cross-site form or `text/plain` "simple" request is not), carries
  the page's token in `X-Review-Token` (a header another site cannot set without a preflight this app
  never grants), and, from a browser, an Origin (or Referer) of the page itself.
- Invited reviewers (`ferrylm review --invite alice,bob`, or `review.reviewers`) each get a link
  with a token of their own, kept in <run>/review/invites.json; a vote is stored under the token's
  reviewer only, so nobody can vote as, or replace the votes of, someone else. Without invitations
  (loopback only) the page asks for a name, and the token is one per server start, held by the page
  as Jupyter does.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ..manifest import write_json_atomic

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def invites(path: Path, names: list[str]) -> dict[str, str]:
    """token → reviewer for every invited name; a name keeps its token across restarts (the links
    already sent stay valid), a new name gets a new one."""
    known = json.loads(path.read_text()) if path.is_file() else {}
    for name in names:
        known.setdefault(name, secrets.token_urlsafe(18))
    if names:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, known)
        path.chmod(0o600)
    return {token: name for name, token in known.items() if name in names}


def served_names(host: str, extra: list[str]) -> set[str]:
    """The names a browser may use to reach the page (without the port)."""
    if is_loopback(host):
        return {*LOOPBACK_NAMES, *extra}
    names = {host, socket.gethostname(), socket.getfqdn(), *extra}
    try:
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    return names


@dataclass
class Guard:
    port: int
    names: set[str]
    invited: dict[str, str] = field(default_factory=dict)  # token → reviewer
    session: str = field(default_factory=lambda: secrets.token_urlsafe(18))

    def host_ok(self, host_header: str | None) -> bool:
        if not host_header:
            return False
        name, _, port = host_header.rpartition(":") if not host_header.endswith("]") else (host_header, "", "")
        return name in self.names and port == str(self.port)

    def reviewer_of(self, token: str | None) -> str | None:
        """The invited reviewer a token names (invite mode)."""
        return self.invited.get(token or "")

    def vote_refusal(self, headers, claimed: str) -> tuple[int, str] | None:
        """(status, why) for a vote that must not be written, else None."""
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return 415, "a vote is sent as application/json"
        own = f"http://{headers.get('host')}"
        origin, referer = headers.get("origin"), headers.get("referer")
        if (origin is not None and origin != own) or (origin is None and referer and not referer.startswith(own + "/")):
            return 403, "the vote comes from another site's page"
        token = headers.get("x-review-token")
        if self.invited:
            who = self.reviewer_of(token)
            if who is None:
                return 403, "the review token is missing or not an invitation's"
            if claimed and claimed != who:
                return 403, f"this invitation votes as {who}, not as {claimed}"
        elif not token or not secrets.compare_digest(token, self.session):
            return 403, "the review token is missing or stale: reload the page"
        return None
