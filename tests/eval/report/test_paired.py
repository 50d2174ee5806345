"""The report says whether a fine-tuned vs base difference could be chance, with exact numbers."""

import pytest

from ferrylm.eval.report.paired import bootstrap_interval, compare, mcnemar_exact, sentence


def test_mcnemar_exact_against_hand_computed_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 4) == 1.0  # 2 * P(X <= 4 | n=9) > 1, capped
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 1024)  # 2 * 0.5**10
    assert mcnemar_exact(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)  # 0.109375
    assert mcnemar_exact(2, 8) == mcnemar_exact(8, 2)


def test_eleven_against_ten_of_164_is_not_significant():
    base = {f"T{i}": float(i < 10) for i in range(164)}
    tuned = {f"T{i}": float(1 <= i < 12) for i in range(164)}  # loses T0, gains T10 and T11
    c = compare(tuned, base)
    assert (c["tasks"], c["only_a"], c["only_b"]) == (164, 2, 1)
    assert c["difference"] == pytest.approx(1 / 164) and c["p"] == 1.0 and not c["significant"]
    assert "not a significant difference" in sentence(c)


def test_a_clear_gain_is_significant():
    base = {f"T{i}": 0.0 for i in range(50)}
    tuned = {f"T{i}": float(i < 20) for i in range(50)}
    c = compare(tuned, base)
    assert c["p"] == pytest.approx(2 * 0.5**20) and c["significant"]
    assert 0 < c["ci95"][0] < 0.4 < c["ci95"][1]


def test_several_samples_per_task_use_the_bootstrap():
    base = {f"T{i}": 0.25 for i in range(40)}
    tuned = {f"T{i}": 0.5 for i in range(40)}
    c = compare(tuned, base)
    assert c["test"] == "paired bootstrap" and c["ci95"] == [pytest.approx(0.25), pytest.approx(0.25)]
    assert c["significant"]
    lo, hi = bootstrap_interval([1.0, -1.0] * 10, iters=2000)
    assert lo < 0 < hi


def test_a_bootstrap_over_too_few_examples_is_no_verdict():
    from ferrylm.eval.report.helped import _line, text

    one = compare({"a": 9.7}, {"a": 5.2})  # its interval is the one difference: it would exclude 0
    assert one["ci95"][0] == one["ci95"][1] > 0 and not one["significant"] and one["too_few"]
    five = compare({f"T{i}": 2.0 + i for i in range(5)}, {f"T{i}": 1.0 for i in range(5)})
    six = compare({f"T{i}": 2.0 + i for i in range(6)}, {f"T{i}": 1.0 for i in range(6)})
    assert (five["significant"], six["significant"], six["too_few"]) == (False, True, False)
    line = _line("chrF", "go", one, True, "examples")
    assert line["verdict"] == "too few to tell" and "too few to test, under 6" in text(line)


def test_the_smallest_difference_a_size_can_show_and_too_few_to_tell():
    from ferrylm.eval.report.paired import smallest_significant

    # 6 discordant tasks all one way is the fewest with p < 0.05 (2 * 0.5**6 = 0.031; 5 give 0.0625)
    assert smallest_significant(8) == 6 / 8 and smallest_significant(164) == 6 / 164 and smallest_significant(5) == 1.0
    eight = compare({i: 1.0 for i in range(8)} | {0: 0.0}, {i: 0.0 for i in range(8)} | {0: 1.0, 1: 1.0})
    assert not eight["significant"] and eight["too_few"]
    assert "too few tasks to tell (the smallest difference 8 can show: 0.75)" in sentence(eight)
    many = compare({i: float(i % 2) for i in range(40)}, {i: float((i + 1) % 2) for i in range(40)})
    assert not many["significant"] and not many["too_few"] and many["smallest_significant"] == 6 / 40
