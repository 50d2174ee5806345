import pytest

from ferrylm.eval.tasks.benchmark import pass_at_k, summarise


def test_unbiased_estimator_against_enumeration():
    # pass@k = P(at least one of k draws without replacement passes); enumerate for small n.
    from itertools import combinations

    for n, c in [(5, 0), (5, 1), (5, 3), (10, 2), (4, 4)]:
        for k in range(1, n + 1):
            draws = list(combinations([1] * c + [0] * (n - c), k))
            assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))
    with pytest.raises(ValueError, match="at least 10 samples"):
        pass_at_k(5, 1, 10)


def test_summary_means_over_tasks():
    results = [{"task_id": "a", "passed": p} for p in (1, 0, 0, 0)] + [
        {"task_id": "b", "passed": p} for p in (1, 1, 0, 0)
    ]
    s = summarise(results, [1, 2, 10])
    assert s["pass@1"] == pytest.approx((0.25 + 0.5) / 2)
    assert s["pass@2"] == pytest.approx((0.5 + 5 / 6) / 2)
    assert "pass@10" not in s and s["per_task"] == {"a": 0.25, "b": 0.5}


def test_stop_sequences_cut_like_a_server():
    from ferrylm.eval.generators import _cut

    assert _cut("    return x\n\nprint(f(1))\n", ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]) == "    return x\n"
    assert _cut("    return x\n", ["\ndef"]) == "    return x\n"


def test_a_seeded_subset_is_fixed_ordered_and_the_same_tasks_in_every_language():
    from ferrylm.eval.tasks.humaneval import load_problems, select

    a, b = load_problems(40, seed=0), load_problems(40, seed=0)
    ids = [p["task_id"] for p in a]
    assert ids == [p["task_id"] for p in b] and len(set(ids)) == 40
    assert ids == sorted(ids, key=lambda t: int(t.split("/")[1]))  # the data set's order
    assert ids != [p["task_id"] for p in load_problems(40)]  # not the first 40
    assert ids != [p["task_id"] for p in load_problems(40, seed=1)]
    cpp = select([{"task_id": f"CPP/{i}"} for i in range(164)], 40, 0)
    assert [t["task_id"].split("/")[1] for t in cpp] == [t.split("/")[1] for t in ids]
    assert len(load_problems(500, seed=0)) == 164 and len(load_problems(None, seed=0)) == 164
