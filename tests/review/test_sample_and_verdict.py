import json

import pytest

from ferrylm.manifest import read_record
from ferrylm.review.sample import ReviewError, draw, load_or_draw
from ferrylm.review.verdict import cohen_kappa, summarise, wilson


def test_the_sample_is_seeded_stratified_blind_and_kept(review_run, tmp_path):
    cfg, out = review_run
    outputs = read_record(out)["outputs"]
    items = draw(outputs, 6, seed=0)
    assert items == draw(outputs, 6, seed=0) and items != draw(outputs, 6, seed=1)
    # round-robin over (kind, language): every group is in the first four items
    assert {(i["kind"], i["language"]) for i in items[:4]} == {
        ("held-out pair", "python"),
        ("held-out pair", "go"),
        ("humaneval", "python"),
        ("humaneval-x", "cpp"),
    }
    assert {i["a"] for i in draw(outputs, 12, seed=0)} == {"fine-tuned", "base"}  # the A side is drawn per item
    task = next(i for i in items if i["kind"] == "humaneval-x")
    assert task["prompt"].startswith("int f") and task["execution"]["fine-tuned"] in ("passed", "failed: wrong")
    kept = tmp_path / "items.json"
    first = load_or_draw(kept, outputs, 6, 0)
    assert load_or_draw(kept, outputs, 12, 5) == first == json.loads(kept.read_text())  # drawn once, then kept
    with pytest.raises(ReviewError, match="eval.compare_base=true"):
        draw({k: v for k, v in outputs.items() if not k.startswith("heldout:base")}, 6, 0)


def test_wilson_and_kappa_match_hand_computation():
    lo, hi = wilson(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    # at 0 of n and n of n the interval ends at the rate itself (6 of 6 once rounded to 0.9999999999999999)
    assert wilson(0, 6)[0] == 0.0 and wilson(6, 6)[1] == 1.0
    # po = 3/4; pe = 1/2 * 1/4 + 1/2 * 3/4 = 1/2; kappa = (0.75 - 0.5) / 0.5
    assert cohen_kappa(["c", "c", "i", "i"], ["c", "i", "i", "i"]) == pytest.approx(0.5)
    assert cohen_kappa(["c", "c"], ["c", "c"]) is None  # chance explains all


def test_summary_counts_votes_preferences_kappa_and_agreement_with_the_tests():
    items = [
        {"id": "t/1", "execution": {"fine-tuned": "passed", "base": "failed: x"}},
        {"id": "t/2", "execution": None},
    ]
    votes = [
        {"reviewer": "ann", "item": "t/1", "fine_tuned": "correct", "base": "incorrect", "preference": "fine-tuned"},
        {"reviewer": "bob", "item": "t/1", "fine_tuned": "correct", "base": "partly", "preference": "tie"},
        {"reviewer": "ann", "item": "t/2", "fine_tuned": "partly", "base": "correct", "preference": "base"},
        {"reviewer": "eve", "item": "gone", "fine_tuned": "correct", "base": "correct", "preference": "tie"},
    ]
    s = summarise(votes, items, "http://127.0.0.1:1")
    assert s["votes"] == 3 and s["items"] == 2 and s["reviewers"] == ["ann", "bob"]  # a vote for no item is ignored
    assert s["models"]["fine-tuned"]["correct"] == 2 and s["models"]["fine-tuned"]["rate"] == pytest.approx(2 / 3)
    assert s["models"]["base"]["rate"] == pytest.approx(1 / 3)
    assert s["preference"] == {"fine-tuned": 1, "base": 1, "tie": 1}
    # ann vs bob on t/1: (correct, incorrect) vs (correct, partly): po = 1/2, pe = 1/2 * 1/2 = 1/4
    (k,) = s["kappa"]
    assert k["items"] == 1 and k["kappa"] == pytest.approx((1 / 2 - 1 / 4) / (1 - 1 / 4))
    # t/1 was executed: 2 fine-tuned judgements (both correct, passed) and 2 base ones (failed; incorrect, partly)
    assert s["execution"]["judged"] == 4 and s["execution"]["agreement"] == 1.0
    assert [j["url"] for j in s["judged"]] == ["http://127.0.0.1:1/item/1", "http://127.0.0.1:1/item/2"]
    assert summarise([], items) is None
