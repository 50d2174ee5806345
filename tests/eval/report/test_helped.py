"""Did the fine-tune help? Smoothed BLEU-4 and the paired bootstrap against hand computations, the
verdict's wording for better / worse / no change, and the scoring of held-out replies."""

import pytest

from ferrylm.eval.heldout import smooth_bleu
from ferrylm.eval.heldout.examples import kept_format, score_rows, select, summarize
from ferrylm.eval.report import helped, helped_view
from ferrylm.eval.report.paired import bootstrap_interval, compare


def test_smoothed_bleu4_by_hand():
    # hyp: returns the maximum value of a function .  (8 tokens); ref: returns the maximum of two integers . (7)
    # matches 1-4 grams: 5/8, (2+1)/(7+1), (1+1)/(6+1), (0+1)/(5+1); brevity exp(min(0, 1 - 8/9)) = 1
    hand = (5 / 8 * 3 / 8 * 2 / 7 * 1 / 6) ** 0.25
    got = smooth_bleu.sentence_score("Returns the maximum value of a function.", "Returns the maximum of two integers.")
    assert got == pytest.approx(hand, rel=1e-12)
    assert smooth_bleu.sentence_score("Same words here.", "same words HERE .") == pytest.approx(1.0)
    # too short a hypothesis pays the brevity penalty exp(1 - (r + 1) / (c + 1)), r = 4 ("a b c d"), c = 2
    short = smooth_bleu.sentence_score("a b", "a b c d")
    assert short == pytest.approx((1 * (1 + 1) / (1 + 1) * 1 / 1 * 1 / 1) ** 0.25 * 2.718281828459045 ** (1 - 5 / 3))
    assert smooth_bleu.corpus_score(["a b c d", "x y"], ["a b c d", "a b c d"]) == pytest.approx(
        100 * (1 + smooth_bleu.sentence_score("x y", "a b c d")) / 2
    )


def test_paired_bootstrap_by_hand():
    # two examples, differences 0 and 1: a resample's mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4,
    # so the 2.5th percentile is 0 and the 97.5th is 1
    assert bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)
    # a constant difference has no spread
    assert bootstrap_interval([0.3] * 7) == (pytest.approx(0.3), pytest.approx(0.3))
    # three examples 0, 0, 3: means are k/3·3/3 for k threes drawn of 3 — P(0 threes) = 8/27 > 2.5 %, so lo = 0;
    # P(3 threes) = 1/27 = 3.7 % > 2.5 %, so hi = 3
    assert bootstrap_interval([0.0, 0.0, 3.0]) == (0.0, 3.0)


def _line(
    diffs_a, diffs_b, higher=True, against="base", metric="Code understanding: smoothed BLEU-4 of summaries (0–100)"
):
    c = compare(dict(enumerate(diffs_a)), dict(enumerate(diffs_b)))
    return helped._line(metric, "all", c, higher, "examples", against)


def test_verdict_wording_better_worse_and_no_change():
    better = _line([10.0 + i % 3 for i in range(30)], [5.0 + i % 2 for i in range(30)])
    worse = _line([1.0] * 30, [2.0 + (i % 2) for i in range(30)])
    same = _line([1.0, 2.0, 3.0, 4.0] * 5, [2.0, 1.0, 4.0, 3.0] * 5)
    assert (better["verdict"], worse["verdict"], same["verdict"]) == ("better", "worse", "no significant change")
    # lower loss is better: the same numbers read the other way
    assert _line([1.0] * 30, [2.0 + (i % 2) for i in range(30)], higher=False)["verdict"] == "better"
    assert "— **better**" in helped.text(better) and "95 % interval" in helped.text(better)
    assert helped.headline([better, same]).startswith("Yes: better on Code understanding")
    assert helped.headline([worse]).startswith("No: worse on")
    assert helped.headline([better, worse]).startswith("Mixed:")
    assert helped.headline([same]).startswith("No significant change on any of 1 measures")
    assert helped.headline([]).startswith("Not answered")


ROW = {
    "source": "m.py::scale",
    "language": "python",
    "task": "generate",
    "messages": [],
    "prompt_code": 'def scale(values, factor=2):\n    """Scale."""\n',
    "reference": "    return [v * factor for v in values]\n",
}


def test_format_kept_and_scores_per_example():
    assert kept_format("```python\n    return [v * factor for v in values]\n```", ROW)
    assert not kept_format("```python\ndef scale(values, factor=2):\n    return values\n```", ROW)  # signature again
    assert not kept_format("    return values", ROW)  # no block
    assert not kept_format("```python\na\n```\nand\n```python\nb\n```", ROW)  # two blocks
    whole = ROW | {"answer_form": "function"}  # asked for the whole function: the signature belongs
    assert kept_format("```python\ndef scale(values, factor=2):\n    return values\n```", whole)
    assert not kept_format("```python\n    return [v * factor for v in values]\n```", whole)
    explain = {
        "source": "m.py::scale",
        "language": "python",
        "task": "explain",
        "messages": [],
        "reference": "Multiply every value by factor.",
    }
    scored = score_rows(
        [ROW, explain],
        [
            "```python\n    return [v * factor for v in values]\n```",
            "Multiply every value by factor.\n\nIt returns a list.",
        ],
    )
    assert scored[0]["bleu"] == pytest.approx(100) and scored[0]["format_kept"] == 1
    assert scored[1]["output"] == "Multiply every value by factor." and scored[1]["smoothed_bleu4"] == pytest.approx(
        100
    )
    s = summarize(scored)
    assert s["explain"]["smoothed_bleu4"] == pytest.approx(100) and s["generate"]["format_kept"] == 1


def test_select_takes_the_first_rows_of_each_task():
    rows = [{"task": t, "i": i} for i, t in enumerate(["generate", "explain"] * 5)] + [{"i": 99}]
    assert [r["i"] for r in select(rows, 2)] == [0, 1, 2, 3]
    # held-out functions of training repositories are scored by their tests, not in these measures
    assert [r["i"] for r in select([{"task": "explain", "split": "functions", "i": 7}, *rows], 2)] == [0, 1, 2, 3]


def test_lines_pair_the_same_examples_per_language():
    ft = [
        {"task": "explain", "language": lang, "smoothed_bleu4": 20.0 + i % 2, "loss": 1.0}
        for i, lang in enumerate(["python", "go"] * 10)
    ]
    base = [
        {"task": "explain", "language": lang, "smoothed_bleu4": 10.0, "loss": 2.0} for lang in ["python", "go"] * 10
    ]
    found = helped.lines({"fine-tuned": ft, "base": base}, [])
    scopes = [(ln["metric"].split(":")[0], ln["scope"], ln["verdict"]) for ln in found]
    assert scopes == [
        ("Code understanding", "all", "better"),
        ("Code understanding", "go", "better"),
        ("Code understanding", "python", "better"),
        ("Held-out loss, explain task", "all", "better"),
        ("Held-out loss, explain task", "go", "better"),
        ("Held-out loss, explain task", "python", "better"),
    ]
    assert found[0]["n"] == 20 and found[1]["n"] == 10


UP, FLAT, DOWN = (
    ([10.0 + i % 3 for i in range(30)], [5.0 + i % 2 for i in range(30)]),
    ([1.0, 2.0, 3.0, 4.0] * 5, [2.0, 1.0, 4.0, 3.0] * 5),
    ([1.0] * 30, [2.0 + (i % 2) for i in range(30)]),
)
GEN = "Code generation: chrF of bodies (0–100)"
U, G = "Code understanding: smoothed BLEU-4 of summaries", "Code generation: chrF of bodies"


def _pair(understanding, generation):
    """Lines of two metrics, each against the base and the base shown 2 examples: (vs base, vs 2-shot)."""
    return [
        _line(*v, against=a, metric=m)
        for m, vs in (("Code understanding: smoothed BLEU-4 of summaries (0–100)", understanding), (GEN, generation))
        for a, v in zip(("base", "base 2-shot"), vs)
    ]


def test_verdict_says_whether_fine_tuning_beat_prompting():
    beat_both = helped.headline(_pair((UP, UP), (FLAT, FLAT)))
    assert beat_both == (
        f"Yes: better than the base model and than the base shown 2 examples, on {U}; "
        "no significant change on the other 1."
    )
    only_cold = helped.headline(_pair((UP, FLAT), (FLAT, FLAT)))
    assert only_cold == (f"No better than prompting: better than the base model only, on {U}.")
    nothing = helped.headline(_pair((FLAT, FLAT), (FLAT, FLAT)))
    assert nothing.startswith(
        "No better than prompting: no significant change against the base model or the base "
        "shown 2 examples on any of 2 measures"
    )
    worse = helped.headline(_pair((UP, DOWN), (FLAT, FLAT)))
    assert worse == (
        f"No better than prompting: better than the base model only, on {U}; "
        f"worse than the base shown 2 examples on {U}."
    )
    mixed = helped.headline(_pair((UP, UP), (FLAT, DOWN)))
    assert mixed.startswith(
        f"Mixed: better than the base model and than the base shown 2 examples, on {U}; "
        f"worse than the base shown 2 examples on {G}"
    )
    # without the few-shot column the sentence is the one against the base alone
    assert helped.headline(_pair((UP, UP), (FLAT, FLAT))[::2]).startswith("Yes: better on Code understanding")
    assert "vs base 2-shot" in helped.text(_pair((UP, UP), (FLAT, FLAT))[1])


def test_lines_compare_with_every_other_model_metric_by_metric():
    ft = [{"task": "explain", "language": "python", "smoothed_bleu4": 20.0 + i % 2} for i in range(12)]
    base = [{"task": "explain", "language": "python", "smoothed_bleu4": 10.0} for _ in range(12)]
    shot = [{"task": "explain", "language": "python", "smoothed_bleu4": 20.0 + (i + 1) % 2} for i in range(12)]
    found = helped.lines({"fine-tuned": ft, "base": base, "base 2-shot": shot}, [])
    assert [(ln["against"], ln["verdict"]) for ln in found] == [
        ("base", "better"),
        ("base 2-shot", "no significant change"),
    ]
    assert helped.headline(found).startswith("No better than prompting: better than the base model only")


def test_a_report_written_before_the_few_shot_column_still_reads():
    old = {k: v for k, v in _pair((UP, UP), (FLAT, FLAT))[0].items() if k not in ("against", "other")}
    old["base"] = 5.5  # how such a line named the base's value
    assert helped.text(old).split(",")[0].endswith("vs base 5.500")
    assert helped.headline([old]).startswith("Yes: better on Code understanding")


def _humaneval_row(ft: list[int], base: list[int], benchmark: str = "humaneval") -> dict:
    return {
        "benchmark": benchmark,
        "language": "python",
        "title": "HumanEval (Python)" if benchmark == "humaneval" else "Own code, held-out functions (python)",
        "paired_vs": {"base": compare(dict(enumerate(ft)), dict(enumerate(base)))},
    }


def test_a_loss_on_a_general_benchmark_leads_the_verdict():
    # the numbers: 109/164 -> 78/164, 40 lost and 9 gained
    base = [1] * 109 + [0] * 55
    ft = [0] * 40 + [1] * 69 + [1] * 9 + [0] * 46
    better = _line([10.0 + i % 3 for i in range(30)], [5.0 + i % 2 for i in range(30)])
    found = [better, *helped.lines(None, [_humaneval_row(ft, base)])]
    first = helped.headline(found)
    assert first.startswith("Worse at general coding: HumanEval (Python) 66.5 % → 47.6 % (McNemar p = ")
    assert "164 tasks). Beyond that: Mixed: better on Code understanding" in first
    # the same loss on the team's own code is not forgetting: it is read like any other measure
    own = helped.lines(None, [_humaneval_row(ft, base, benchmark="own-heldout")])
    assert helped.headline([better, *own]).startswith("Mixed: better on Code understanding")
    # no significant loss: no lead
    same = helped.lines(None, [_humaneval_row(base, base)])
    assert helped.headline([better, *same]).startswith("Yes: better on Code understanding")


def test_the_first_line_answers_on_the_teams_own_measure():
    """Held-out functions of the repositories it trained on lead, against the base and the base with retrieval,
    with the smallest difference their number of tasks can show; a run without that track reads as before."""
    base, ft = [1] * 22 + [0] * 98, [1] * 22 + [1] * 15 + [0] * 83  # 120 tasks: 22 → 37, 15 gained
    rival = [1] * 25 + [0] * 95
    row = {
        "benchmark": "own-functions",
        "language": "python",
        "title": "Held-out functions of training repositories (python, the file shown)",
        "paired_vs": {
            "base": compare(dict(enumerate(ft)), dict(enumerate(base))),
            "base + retrieval": compare(dict(enumerate(ft)), dict(enumerate(rival))),
            "fine-tuned + retrieval": compare(dict(enumerate(ft)), dict(enumerate(ft))),
        },
    }
    first = helped.headline(helped.lines(None, [row, _humaneval_row(base, base)]))
    assert first.startswith(
        "On your own code (held-out functions of the repositories it trained on): python: fine-tuned 30.8 % vs base "
        "18.3 % — better (McNemar p = 6.1e-05, 120 tasks; the smallest difference they can show: "
    )
    assert "; against base + retrieval 20.8 % — better (McNemar p = " in first
    assert "; fine-tuned + retrieval 30.8 %. " in first
    few = {**row, "paired_vs": {"base": compare({0: 1, 1: 0, 2: 1}, {0: 0, 1: 0, 2: 0})}}
    assert "vs base 0.0 % — too few to tell (McNemar p = 0.5, 3 tasks; no difference can show)" in helped.headline(
        helped.lines(None, [few])
    )
    assert helped.team(helped.lines(None, [_humaneval_row(base, base)])) == ""


def test_the_first_screen_is_one_table_of_measures_by_model():
    head, rows = helped_view.table(_pair((UP, FLAT), (DOWN, FLAT)))
    assert head == ["measure", "base", "base 2-shot", "fine-tuned"]
    understanding = next(r for r in rows if r[0] == U)
    # fine-tuned beat the base there: the base's cell is marked worse; against 2-shot no significant change
    assert understanding[1].endswith(" ▼") and not understanding[2].endswith(("▲", "▼"))
    generation = next(r for r in rows if r[0] == G)
    assert generation[1].endswith(" ▲")  # the base is significantly better than fine-tuned on generation
    md = "\n".join(helped_view.markdown(_pair((UP, FLAT), (DOWN, FLAT))))
    # the answer first, then the table it reads from
    assert md.index("**No better than prompting") < md.index("| measure | base | base 2-shot | fine-tuned |")


def test_retrieval_is_a_rival_column_and_a_further_step_for_the_fine_tune():
    own = "Held-out repositories (python) Pass@1"
    found = _pair((UP, UP), (FLAT, FLAT)) + [
        _line(*UP, against="base", metric=own),
        _line(*UP, against="base 2-shot", metric=own),
        _line(*FLAT, against="base + retrieval", metric=own),
        _line(*DOWN, against="fine-tuned + retrieval", metric=own),  # fine-tuned alone worse: retrieval helps it
    ]
    head, rows = helped_view.table(found)
    assert head == ["measure", "base", "base 2-shot", "base + retrieval", "fine-tuned", "fine-tuned + retrieval"]
    assert next(r for r in rows if r[0].startswith("Held-out repositories"))[-1].endswith(" ▲")
    assert next(r for r in rows if r[0] == U)[3] == "—"  # retrieval asks the repository tasks alone
    assert helped.headline(found) == (
        f"Yes: better than the base model and than the base shown 2 examples, on {U}; "
        "better than the base model and than the base shown 2 examples only, on Held-out repositories; "
        "no significant change on the other 1. Against the base model with retrieval: no significant change on "
        "1 measure. On your own code fine-tuning did not beat retrieval, which needs no training run: try retrieval "
        "first. Retrieval on the fine-tuned model: helps on Held-out repositories."
    )


def test_the_answer_says_plainly_whether_fine_tuning_beat_retrieval():
    own = "Held-out repositories (python) Pass@1"
    base = [_line(*UP, against="base", metric=own)]
    beaten = helped.headline(base + [_line(*UP, against="base + retrieval", metric=own)])
    assert "Against the base model with retrieval: better on Held-out repositories." in beaten
    assert "try retrieval first" not in beaten and "Too few" not in beaten
    few = [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]  # 4 tasks: no difference could show
    assert helped.headline(base + [_line(*few, against="base + retrieval", metric=own)]).endswith(
        "Too few of your own tasks to tell whether fine-tuning beats retrieval."
    )
    lost = helped.headline(base + [_line(*DOWN, against="base + retrieval", metric=own)])
    assert "Against the base model with retrieval: worse on Held-out repositories." in lost
    assert lost.endswith("try retrieval first.")


def test_a_quantized_artifact_is_the_model_as_shipped_not_a_rival():
    def pass_line(ft, other, against):
        c = compare(dict(enumerate(ft)), dict(enumerate(other)))
        return helped._line("HumanEval Pass@1", "python", c, True, "tasks", against)

    merged = [1.0] * 30 + [0.0] * 10
    found = _pair((UP, UP), (FLAT, FLAT)) + [
        pass_line(merged, merged, "base"),
        pass_line(merged, [0.0] * 20 + [1.0] * 10 + [0.0] * 10, "base 2-shot"),
        pass_line(merged, merged, "base + retrieval"),
        pass_line(merged, [0.0] * 12 + [1.0] * 18 + [0.0] * 10, "fine-tuned (w4a16)"),  # 12 tasks lost to rounding
    ]
    head, rows = helped_view.table(found)
    assert head == ["measure", "base", "base 2-shot", "base + retrieval", "fine-tuned", "fine-tuned (w4a16)"]
    assert next(r for r in rows if r[0].startswith("HumanEval"))[-1] == "0.450 ▼"
    answer = helped.headline(found)
    # the artifact is neither beaten nor a reason for "Mixed": it gets its own sentence
    assert "w4a16" not in answer.split(". The exported")[0]
    assert answer.endswith(
        "The exported w4a16 artifact against the fine-tuned model: worse on HumanEval Pass@1 [python]."
    )


def test_the_teams_languages_are_also_answered_together():
    """Two languages, each too few to tell, are one answer together: the pooled row pairs every task (ids kept
    apart by language), leads the first line, and is not counted again among the measures."""
    from ferrylm.eval.report.render import language_rows
    from ferrylm.eval.tasks.benchmark import summarise

    def track(language, passed):
        title = f"Held-out functions of training repositories ({language}, the file shown)"
        results = [{"task_id": f"t{i}", "passed": p} for i, p in enumerate(passed)]  # the same ids in both
        return {"benchmark": "own-functions", "language": language, "title": title, **summarise(results, [1])}

    go_base, go_ft = [1] * 5 + [0] * 35, [1] * 5 + [1] * 6 + [0] * 29  # 40 tasks: 6 gained, p = 0.031
    py_base, py_ft = [1] * 3 + [0] * 37, [1] * 3 + [1] * 5 + [0] * 32  # 5 gained, p = 0.0625
    details = {
        "base": {"benchmarks": [track("go", go_base), track("python", py_base)]},
        "fine-tuned": {"benchmarks": [track("go", go_ft), track("python", py_ft)]},
        "base + retrieval": {"benchmarks": [track("go", go_base)]},  # not asked in python: not pooled
    }
    rows = language_rows(details)
    pooled = rows[-1]
    assert [r["language"] for r in rows] == ["go", "python", "all languages"]
    assert pooled["title"] == "Held-out functions of training repositories (all languages, the file shown)"
    assert pooled["cells"] == {"base": "0.1 (8/80)", "fine-tuned": "0.2375 (19/80)"}
    assert pooled["paired"]["tasks"] == 80 and (pooled["paired"]["only_a"], pooled["paired"]["only_b"]) == (11, 0)
    assert set(pooled["paired_vs"]) == {"base"}
    found = helped.lines(None, rows)
    first = helped.headline(found)
    assert first.startswith(
        "On your own code (held-out functions of the repositories it trained on): all languages: fine-tuned 23.8 % "
        "vs base 10.0 % — better (McNemar p = 0.00098, 80 tasks"
    )
    assert "; go: fine-tuned 27.5 % vs base 12.5 % — better" in first
    assert "; python: fine-tuned 20.0 % vs base 7.5 % — no significant change" in first
    # the answer after it counts each language once: go better, python no change, no third measure
    assert "on the other 1." in first and "other 2" not in first


def test_the_first_screen_plots_each_track_s_pass_at_1_with_its_interval():
    import base64
    import io

    from PIL import Image

    own = "Held-out functions of training repositories (python, the file shown) Pass@1"
    tuned = {i: float(i % 2 == 0) for i in range(40)}  # 20 of 40
    base = {i: float(i % 4 == 0) for i in range(40)}  # 10 of 40, every one of them also passed fine-tuned
    lines = [helped._line(own, "python", compare(tuned, base), True, "tasks"), _line([1.0] * 30, [2.0] * 30)]
    tracks = helped_view._tracks(lines)
    assert list(tracks) == ["Held-out functions of training repositories [python]"]  # the BLEU line is no track
    track = tracks["Held-out functions of training repositories [python]"]
    assert (track["n"], track["rates"]) == (40, {"base": 0.25, "fine-tuned": 0.5})
    assert track["tasks"] == {"base": 40, "fine-tuned": 40}
    assert track["base"]["p"] == pytest.approx(2 * 0.5**10)  # McNemar: 10 won, 0 lost
    picture = Image.open(io.BytesIO(base64.b64decode(helped_view.pass_plot(lines))))
    assert picture.width > 300 and picture.height > 100
    assert helped_view.pass_plot(lines[1:]) is None
    # 0 of 6 and 6 of 6: Wilson's upper end for 6 of 6 rounds to just below 1, and the plot still draws
    nothing, everything = {i: 0.0 for i in range(6)}, {i: 1.0 for i in range(6)}
    assert helped_view.pass_plot([helped._line(own, "go", compare(nothing, everything), True, "tasks")])
    page = helped_view.to_html(lines)
    assert page.index('class="headline"') < page.index('<table class="helped">') < page.index('alt="Pass@1 per track"')


def test_a_name_that_says_its_language_is_not_told_it_again():
    go = {"metric": "HumanEval-X go Pass@1", "scope": "go"}
    assert helped.short(go) == "HumanEval-X go Pass@1"
    assert helped.short({"metric": "HumanEval (Python) Pass@1", "scope": "python"}) == "HumanEval [python]"
    assert helped.short({"metric": "Held-out loss, explain task", "scope": "all"}) == "Held-out loss, explain task"
