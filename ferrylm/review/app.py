"""The review web app: one page per item (prompt, outputs A and B blind, the reference collapsed),
server-side syntax highlighting, a JSON vote API that writes before the page moves on, and the
execution results revealed only after the vote. No asset leaves the process: no CDN, no network."""

from __future__ import annotations

import html
import json
from pathlib import Path
from urllib.parse import quote

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.routing import Route

from ..prompts import extract_code
from .guard import Guard
from .store import VERDICTS, Votes

_PAGE = (Path(__file__).parent / "page.html").read_text()
_CSS = HtmlFormatter(style="friendly").get_style_defs(".code")


def _code(text: str, language: str) -> str:
    try:
        lexer = get_lexer_by_name(language)
    except ClassNotFound:
        lexer = TextLexer()
    return highlight(text or " ", lexer, HtmlFormatter(cssclass="code"))


def _prompt(item: dict) -> str:
    """A held-out pair's prompt is an instruction and a code block; a task's prompt is code."""
    text = item["prompt"]
    if "```" not in text:
        return _code(text, item["language"])
    instruction = text.split("```", 1)[0].strip()
    return f"<p>{html.escape(instruction)}</p>" + _code(extract_code(text), item["language"])


def _problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _who(request: Request, guard: Guard) -> tuple[str, str, str] | HTMLResponse:
    """(reviewer, the query that keeps them on the next page, the token the page votes with), or
    the page that says why not: an invitation's token names its reviewer; else a typed name."""
    if guard.invited:
        token = request.query_params.get("token", "")
        reviewer = guard.reviewer_of(token)
        if reviewer is None:
            return HTMLResponse("<p>This review is by invitation: open the link you were sent.</p>", status_code=403)
        return reviewer, f"token={quote(token)}", token
    reviewer = request.query_params.get("reviewer", "").strip()
    return reviewer, f"reviewer={quote(reviewer)}", guard.session


def make_app(items: list[dict], votes: Votes, guard: Guard) -> Starlette:
    index = {item["id"]: item for item in items}

    def page(request: Request):
        return _page(request, items, votes, guard)

    async def vote(request: Request):
        return await _vote(request, items, index, votes, guard)

    return Starlette(
        routes=[Route("/", page), Route("/item/{n:int}", page), Route("/api/vote", vote, methods=["POST"])]
    )


def _page(request: Request, items: list[dict], votes: Votes, guard: Guard):
    """The item page (or the name form, or a redirect to the first item this reviewer has not judged)."""
    if not guard.host_ok(request.headers.get("host")):
        return HTMLResponse("<p>Unknown host.</p>", status_code=421)
    who = _who(request, guard)
    if isinstance(who, HTMLResponse):
        return who
    reviewer, query, token = who
    n = request.path_params.get("n")
    if not reviewer:
        return HTMLResponse(_PAGE.replace("{{css}}", _CSS).replace("{{body}}", _NAME_FORM))
    mine = votes.of(reviewer)
    if n is None:  # resume: the first item this reviewer has not judged
        n = next((i + 1 for i, it in enumerate(items) if it["id"] not in mine), len(items))
        return RedirectResponse(f"/item/{n}?{query}", status_code=303)
    if not 1 <= n <= len(items):
        return HTMLResponse(f"<p>No item {n}: there are {len(items)}.</p>", status_code=404)
    item = items[n - 1]
    a, b = item["a"], _other(item["a"])
    answers = "text" if item["kind"] == "held-out summary" else item["language"]  # a summary is prose
    state = {
        "item": item["id"],
        "n": n,
        "total": len(items),
        "reviewer": reviewer,
        "done": len(mine),
        "previous": _as_shown(mine.get(item["id"]), a),
        "token": token,
        "query": query,
    }
    body = _ITEM.format(
        n=n,
        total=len(items),
        done=len(mine),
        reviewer=html.escape(reviewer),
        kind=html.escape(item["kind"]),
        language=html.escape(item["language"]),
        source=html.escape(item.get("source") or ""),
        prompt=_prompt(item),
        a=_code(item["outputs"][a], answers),
        b=_code(item["outputs"][b], answers),
        reference=_code(item["reference"], answers),
        state=json.dumps(state).replace("</", "<\\/"),
    )  # inside <script> entities are not decoded
    return HTMLResponse(_PAGE.replace("{{css}}", _CSS).replace("{{body}}", body))


async def _vote(request: Request, items: list[dict], index: dict, votes: Votes, guard: Guard):
    """A vote, saved; or a problem response saying why not."""
    if not guard.host_ok(request.headers.get("host")):
        return _problem(421, "the request names another host than the one served")
    try:
        v = await request.json()
    except ValueError:
        v = None
    claimed = str(v.get("reviewer") or "").strip() if isinstance(v, dict) else ""
    if refusal := guard.vote_refusal(request.headers, claimed):
        return _problem(*refusal)
    if v is None:
        return _problem(400, "the body is not JSON")
    if not isinstance(v, dict):
        return _problem(400, "the body must be a JSON object")
    reviewer = guard.reviewer_of(request.headers.get("x-review-token")) or claimed
    if problem := _invalid(v, reviewer, index):
        return _problem(*problem)
    item, comment = index[v["item"]], v.get("comment", "")
    a, b = item["a"], _other(item["a"])
    preference = {"a": a, "b": b, "tie": "tie"}[v["preference"]]
    votes.put(reviewer, item["id"], {a: v["a"], b: v["b"]}, preference, comment, shown_as_a=a)
    execution = item["execution"] or {}
    return JSONResponse(
        {
            "saved": True,
            "done": len(votes.of(reviewer)),
            "total": len(items),
            "execution": {"a": execution.get(a), "b": execution.get(b)},
        }
    )


def _invalid(v: dict, reviewer: str, index: dict) -> tuple[int, str] | None:
    """(status, why) for a vote whose fields are not a vote, else None."""
    if not reviewer or len(reviewer) > 80:
        return 422, "reviewer: a name of 1 to 80 characters is needed"
    if index.get(v.get("item")) is None:
        return 404, f"item: {v.get('item')!r} is not one of this review's items"
    if v.get("a") not in VERDICTS or v.get("b") not in VERDICTS:
        return 422, f"a, b: each output's verdict is one of {', '.join(VERDICTS)}"
    if v.get("preference") not in ("a", "b", "tie"):
        return 422, "preference: one of a, b, tie"
    comment = v.get("comment", "")
    if not isinstance(comment, str) or len(comment) > 4000:
        return 422, "comment: text of at most 4000 characters"
    return None


def _other(model: str) -> str:
    return "base" if model == "fine-tuned" else "fine-tuned"


def _as_shown(vote: dict | None, a: str) -> dict | None:
    """A stored vote (by model) as the page shows it (A / B)."""
    if vote is None:
        return None
    col = {"fine-tuned": "fine_tuned", "base": "base"}
    b = _other(a)
    preference = {a: "a", b: "b", "tie": "tie"}[vote["preference"]]
    return {"a": vote[col[a]], "b": vote[col[b]], "preference": preference, "comment": vote["comment"]}


_NAME_FORM = """<h1>ferrylm review</h1><form method="get" action="/"><label>Your name
<input name="reviewer" id="reviewer" autofocus required maxlength="80"></label> <button>Start</button></form>
<p>Each item shows a prompt and two outputs, A and B, from the fine-tuned and the base model in an order drawn per
item. Judge each output, say which you prefer, and save; the tests' results (where the item was executed) show after.</p>"""

_ITEM = """<header><b>ferrylm review</b> · {reviewer} · <span id="progress">{done} / {total}</span> judged ·
item {n} of {total} · {kind} · {language} <small>{source}</small></header>
<h2>Prompt</h2>{prompt}
<div class="pair">
 <section id="A"><h2>A</h2>{a}<div class="verdict" data-side="a"></div><div class="exec" id="exec-a"></div></section>
 <section id="B"><h2>B</h2>{b}<div class="verdict" data-side="b"></div><div class="exec" id="exec-b"></div></section>
</div>
<details><summary>Reference answer</summary>{reference}</details>
<div id="prefer"></div>
<textarea id="comment" rows="2" placeholder="comment (optional)"></textarea>
<p><button id="save">Save vote (Enter)</button> <button id="next" disabled>Next item (N)</button> <span id="status"></span></p>
<p class="keys">Keys: A is 1 correct · 2 partly · 3 incorrect; B is 7 correct · 8 partly · 9 incorrect;
preference a / b / t (tie); Enter saves; N goes on.</p>
<script id="state" type="application/json">{state}</script>"""
