from ferrylm.eval.tasks import humaneval
from ferrylm.eval.tasks.benchmark import Track, asked_for


def test_asked_for_the_whole_function_where_the_fine_tune_answers_so():
    problems = humaneval.load_problems(limit=2)
    own = Track("repo-tasks", "python", "own", "pass_at_1_own", problems, question=lambda p: "the file, then: body?")
    he = humaneval.track(problems)
    asked_for([he, own], "function")
    assert he.ask(problems[0]).startswith("Complete this Python function. Reply with the whole function")
    assert problems[0]["prompt"] in he.ask(problems[0])
    assert own.ask(problems[0]) == "the file, then: body?"  # a track's own question stays
    body = humaneval.track(problems)
    asked_for([body], "body")
    assert body.question is None  # no question of its own: the generator's default, the body only
    assert body.ask(problems[0]).startswith("Complete the body of this Python function. Reply with the body only")
