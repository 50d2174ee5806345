"""Did the fine-tune help? One line per metric and compared model (the base; the base shown a few
training examples, eval.few_shot): fine-tuned − that model over the same examples, its paired
95 % interval (bootstrap of the mean per-example difference; McNemar's exact test where the outcome is
pass/fail), and the verdict — better, worse, or no significant change.

The metrics: code understanding (smoothed BLEU-4 of the explain task's summaries), code generation
(sentence BLEU and chrF of the bodies, how often the reply kept the asked format), held-out loss per
task, and each benchmark language's Pass@1; the held-out ones also per language where the held-out
repositories hold more than one.
"""

from __future__ import annotations

from ..heldout.few_shot import shown_words
from .paired import MIN_BOOTSTRAP, compare

# (task, per-example key, label, higher is better)
METRICS = (
    ("explain", "smoothed_bleu4", "Code understanding: smoothed BLEU-4 of summaries (0–100)", True),
    ("generate", "bleu", "Code generation: sentence BLEU of bodies (0–100)", True),
    ("generate", "chrf", "Code generation: chrF of bodies (0–100)", True),
    ("generate", "format_kept", "Code generation: replies in the asked format (share)", True),
    ("explain", "loss", "Held-out loss, explain task", False),
    ("generate", "loss", "Held-out loss, generate task", False),
)


def verdict(c: dict, higher_is_better: bool) -> str:
    """better / worse / no significant change, from a paired comparison (paired.compare's dict)."""
    if not c.get("tasks"):
        return "not compared"
    if not c["significant"]:
        return "too few to tell" if c.get("too_few") else "no significant change"
    return "better" if (c["difference"] > 0) == higher_is_better else "worse"


def _line(label: str, scope: str, c: dict, higher: bool, unit: str, against: str = "base") -> dict:
    return {
        "metric": label,
        "scope": scope,
        "against": against,
        "fine-tuned": c.get("a"),
        "other": c.get("b"),
        "difference": c.get("difference"),
        "ci95": c.get("ci95"),
        "test": c.get("test"),
        "p": c.get("p"),
        "n": c.get("tasks", 0),
        "unit": unit,
        "higher_is_better": higher,
        "verdict": verdict(c, higher),
        "too_few": bool(c.get("too_few")),
        "smallest_significant": c.get("smallest_significant"),
    }


def _heldout_lines(ft: list[dict], other: list[dict], against: str) -> list[dict]:
    languages = sorted({r.get("language") or "text" for r in ft})
    scopes = ["all"] + (languages if len(languages) > 1 else [])
    lines = []
    for task, key, label, higher in METRICS:
        for scope in scopes:
            a, b = (
                {
                    i: r[key]
                    for i, r in enumerate(rows)
                    if r["task"] == task
                    and r.get(key) is not None
                    and (scope == "all" or (r.get("language") or "text") == scope)
                }
                for rows in (ft, other)
            )
            if not set(a) & set(b):
                continue
            lines.append(_line(label, scope, compare(a, b), higher, "examples", against))
    return lines


def _benchmark_lines(language_rows: list[dict]) -> list[dict]:
    # general: a public benchmark (HumanEval, HumanEval-X), not the team's own code; a loss there is forgetting
    return [
        {
            **_line(f"{r['title']} Pass@1", r["language"], c, True, "tasks", against),
            "general": not r["benchmark"].startswith("own-"),
            "benchmark": r["benchmark"],
            "pooled": bool(r.get("pooled")),  # its languages' lines again as one: said by team(), not counted twice
        }
        for r in language_rows
        for against, c in (r.get("paired_vs") or {}).items()
    ]


def lines(scored: dict[str, list[dict]] | None, language_rows: list[dict]) -> list[dict]:
    """Every comparison the run allows, the fine-tuned model against each other model measured on the
    same examples (the base; the base shown a few examples), each metric's lines together; [] when only
    one model was measured."""
    ft = (scored or {}).get("fine-tuned") or []
    found = [
        ln
        for against, rows in (scored or {}).items()
        if against != "fine-tuned" and ft and rows and len(rows) == len(ft)
        for ln in _heldout_lines(ft, rows, against)
    ] + _benchmark_lines(language_rows)
    order = list(dict.fromkeys((ln["metric"], ln["scope"]) for ln in found))
    return sorted(found, key=lambda ln: order.index((ln["metric"], ln["scope"])))


def compared(line: dict) -> str:
    return line.get("against", "base")  # a report written before the few-shot column compared with the base only


def num(v) -> str:
    return "—" if v is None else f"{v:.3f}" if abs(v) < 10 else f"{v:.2f}"


def text(line: dict) -> str:
    """One sentence: '<metric> [scope]: fine-tuned a vs <other> b, <diff> (95 % interval lo to hi, n) — <verdict>'."""
    lo, hi = line["ci95"] or (None, None)
    scope = "" if line["scope"] == "all" else f" [{line['scope']}]"
    test = f"; McNemar p = {line['p']:.3g}" if line.get("p") is not None else ""
    if line.get("smallest_significant") is not None:
        test += f"; the smallest difference {line['n']} tasks can show: {line['smallest_significant']:.3f}"
    elif line.get("too_few"):
        test += f"; too few to test, under {MIN_BOOTSTRAP}"
    return (
        f"{line['metric']}{scope}: fine-tuned {num(line['fine-tuned'])} vs {compared(line)} {num(line.get('other', line.get('base')))}, "
        f"difference {line['difference']:+.3f} (95 % interval {lo:+.3f} to {hi:+.3f}, {line['n']} {line['unit']}"
        f"{test}) — **{line['verdict']}**"
    )


def headline(found: list[dict]) -> str:
    """The answer, led by the team's own measure (held-out functions of the repositories it trained on: team()),
    then any significant loss against the base on a general benchmark (a fine-tune that forgot how to code is
    never a plain success), then one sentence from the overall lines (not the per-language ones): against the
    base alone, or — with the base shown a few examples also measured — whether fine-tuning beat prompting."""
    forgot = [ln for ln in found if ln.get("general") and compared(ln) == "base" and ln["verdict"] == "worse"]
    answer = _answer(found)
    if forgot:
        answer = f"Worse at general coding: {', '.join(_fell(ln) for ln in forgot)}. Beyond that: {answer}"
    return team(found) + answer


TEAM = "own-functions"  # the benchmark of held-out functions of training repositories (eval/repo/track.py)


def team(found: list[dict]) -> str:
    """'On your own code (…): python: fine-tuned 31.0 % vs base 22.0 % — better (McNemar p = …, 120 tasks, the
    smallest difference they can show 9.2 points); against base + retrieval 25.0 % — …; fine-tuned + retrieval
    33.0 %. ' — one part a language, led by all languages together where there are several; '' where the run
    has no such track."""
    own = [ln for ln in found if ln.get("benchmark") == TEAM]
    parts = []
    # the languages together first (the team's answer), then each language
    for language in sorted(dict.fromkeys(ln["scope"] for ln in own), key=lambda s: not _pooled(own, s)):
        vs = {compared(ln): ln for ln in own if ln["scope"] == language}
        base, rival, further = vs.get("base"), vs.get(BASE_RETRIEVAL), vs.get(TUNED_RETRIEVAL)
        if base is None:
            continue
        part = f"{language}: fine-tuned {_pct(base['fine-tuned'])} vs base {_pct(base['other'])} — {_judged(base)}"
        if rival:
            part += f"; against base + retrieval {_pct(rival['other'])} — {_judged(rival)}"
        if further:
            part += f"; fine-tuned + retrieval {_pct(further['other'])}"
        parts.append(part)
    if not parts:
        return ""
    return "On your own code (held-out functions of the repositories it trained on): " + "; ".join(parts) + ". "


def _pooled(own: list[dict], scope: str) -> bool:
    return any(ln.get("pooled") for ln in own if ln["scope"] == scope)


def _pct(v) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def _judged(line: dict) -> str:
    """'better (McNemar p = 0.012, 120 tasks; the smallest difference they can show: 9.2 points)'."""
    p = f"McNemar p = {line['p']:.2g}, " if line.get("p") is not None else ""
    least = line.get("smallest_significant")
    if least is not None:
        least = (
            "; no difference can show"
            if least >= 1
            else f"; the smallest difference they can show: {100 * least:.1f} points"
        )
    return f"{line['verdict']} ({p}{line['n']} {line['unit']}{least or ''})"


def _fell(line: dict) -> str:
    name = line["metric"].removesuffix(" Pass@1")
    return (
        f"{name} {100 * line['other']:.1f} % → {100 * line['fine-tuned']:.1f} % "
        f"(McNemar p = {line['p']:.2g}, {line['n']} {line['unit']})"
        if line.get("p") is not None
        else f"{name} {100 * line['other']:.1f} % → {100 * line['fine-tuned']:.1f} % ({line['n']} {line['unit']})"
    )


BASE_RETRIEVAL = "base + retrieval"  # the rival a team would try before fine-tuning
TUNED_RETRIEVAL = "fine-tuned + retrieval"  # the fine-tune itself with retrieval: not a rival, a further step


def artifact_label(kind: str) -> str:
    """The column of an exported quantized artifact: the fine-tuned model as shipped, not a rival."""
    return f"fine-tuned ({kind})"


def artifact_kind(label: str) -> str | None:
    return label[len("fine-tuned (") : -1] if label.startswith("fine-tuned (") and label.endswith(")") else None


def not_rival(against: str) -> bool:
    return against == TUNED_RETRIEVAL or artifact_kind(against) is not None


def _answer(found: list[dict]) -> str:
    everything = [ln for ln in found if (ln["scope"] == "all" or "Pass@1" in ln["metric"]) and not ln.get("pooled")]
    overall = [ln for ln in everything if not not_rival(compared(ln))]
    if not overall:
        return "Not answered: the fine-tuned and the base model were not both measured on the same examples."
    others = list(dict.fromkeys(compared(ln) for ln in overall))
    answer = _against_base(overall) if others == ["base"] else _against_prompting(overall, others)
    rival = [ln for ln in overall if compared(ln) == BASE_RETRIEVAL]
    further = [ln for ln in everything if compared(ln) == TUNED_RETRIEVAL]
    shipped = {a: [ln for ln in everything if compared(ln) == a] for a in dict.fromkeys(map(compared, everything))}
    return (
        answer
        + _sentence("Against the base model with retrieval", rival, "better", "worse")
        + _retrieval_first(rival)
        + _sentence("Retrieval on the fine-tuned model", further, "helps", "hurts", flip=True)
        + "".join(
            _sentence(
                f"The exported {artifact_kind(a)} artifact against the fine-tuned model",
                ls,
                "better",
                "worse",
                flip=True,
            )
            for a, ls in shipped.items()
            if artifact_kind(a)
        )
    )


def _retrieval_first(rival: list[dict]) -> str:
    """Said plainly where the fine-tune beat the base with retrieval on none of the team's own tracks: the
    rival costs no training run, so it is the one to try first."""
    if not rival or any(ln["verdict"] == "better" for ln in rival):
        return ""
    if all(ln["verdict"] == "too few to tell" for ln in rival):
        return " Too few of your own tasks to tell whether fine-tuning beats retrieval."
    return " On your own code fine-tuning did not beat retrieval, which needs no training run: try retrieval first."


def _sentence(lead: str, lines: list[dict], up: str, down: str, flip: bool = False) -> str:
    """' <lead>: <up> on …; <down> on …; no significant change on N measures.' ('' without lines);
    `flip`: the other model's gain is `up` (the line's verdict is the fine-tuned model's)."""
    if not lines:
        return ""
    ups = [short(ln) for ln in lines if ln["verdict"] == ("worse" if flip else "better")]
    downs = [short(ln) for ln in lines if ln["verdict"] == ("better" if flip else "worse")]
    parts = [f"{up} on {', '.join(ups)}"] * bool(ups) + [f"{down} on {', '.join(downs)}"] * bool(downs)
    rest = len(lines) - len(ups) - len(downs)
    parts += [f"no significant change on {'the other ' if parts else ''}{rest} measure{'s' * (rest != 1)}"] * bool(rest)
    return f" {lead}: " + "; ".join(parts) + "."


def _against_base(overall: list[dict]) -> str:
    better = [ln for ln in overall if ln["verdict"] == "better"]
    worse = [ln for ln in overall if ln["verdict"] == "worse"]
    if not better and not worse:
        return (
            f"No significant change on any of {len(overall)} measures: at this run's size the difference "
            f"could be chance."
        )
    few = [ln for ln in overall if ln["verdict"] == "too few to tell"]
    parts = []
    if better:
        parts.append("better on " + ", ".join(short(ln) for ln in better))
    if worse:
        parts.append("worse on " + ", ".join(short(ln) for ln in worse))
    if few:
        parts.append("too few tasks to tell on " + ", ".join(short(ln) for ln in few))
    rest = len(overall) - len(better) - len(worse) - len(few)
    return (
        f"{'Yes' if better and not worse else 'Mixed' if better else 'No'}: "
        + "; ".join(parts)
        + (f"; no significant change on the other {rest}." if rest else ".")
    )


def _against_prompting(overall: list[dict], others: list[str]) -> str:
    """'Yes: better than the base model and than the base shown 2 examples, on …' where some measure
    beats both; 'No better than prompting: …' where none beats the few-shot base."""
    verdicts: dict[str, dict[str, str]] = {}
    for ln in overall:
        verdicts.setdefault(short(ln), {})[compared(ln)] = ln["verdict"]
    names = [shown_words(o) for o in others]
    # better than every rival measured on it (the retrieval column measures the repository tasks alone)
    beats_all = [m for m, v in verdicts.items() if v and all(x == "better" for x in v.values())]
    rivals = {m: tuple(o for o in others if o in verdicts[m]) for m in beats_all}
    # measures better than some rivals, grouped by which: "better than A and than B only, on …"
    beaten = {m: tuple(o for o in others if v.get(o) == "better") for m, v in verdicts.items() if m not in beats_all}
    beats_some = {r: [m for m, b in beaten.items() if b == r] for r in dict.fromkeys(beaten.values()) if r}
    worse = {o: [m for m, v in verdicts.items() if v.get(o) == "worse"] for o in others}
    parts = [
        f"better than {' and than '.join(shown_words(o) for o in r)} only, on {', '.join(ms)}"
        for r, ms in beats_some.items()
    ]
    parts += [f"worse than {shown_words(o)} on {', '.join(ms)}" for o, ms in worse.items() if ms]
    rest = sum(
        1
        for m in verdicts
        if m not in beats_all
        and not any(m in ms for ms in beats_some.values())
        and not any(m in ms for ms in worse.values())
    )
    tail = (("; " + "; ".join(parts)) if parts else "") + (
        f"; no significant change on the other {rest}." if rest else "."
    )
    if beats_all:
        lead = "Mixed" if any(worse.values()) else "Yes"
        groups = {r: [m for m in beats_all if rivals[m] == r] for r in dict.fromkeys(rivals.values())}
        beaten = "; ".join(
            f"better than {' and than '.join(shown_words(o) for o in r)}, on {', '.join(ms)}"
            for r, ms in groups.items()
        )
        return f"{lead}: {beaten}" + tail
    if any(beats_some.values()) or any(worse.values()):
        return "No better than prompting: " + "; ".join(parts) + "."
    return (
        f"No better than prompting: no significant change against {' or '.join(names)} on any of "
        f"{len(verdicts)} measures (at this run's size a difference could be chance)."
    )


def short(line: dict) -> str:
    """The metric's name, with its scope where the name does not already say it ("HumanEval-X go", not "… go [go]")."""
    name, scope = line["metric"].split(" (")[0], line["scope"]
    return name if scope == "all" or scope in name.split() else f"{name} [{scope}]"
