"""A Python reply read as the body of the function it answers."""

from ferrylm.eval.replies.python import python_body

TASK = {"name": "Compose.first", "indent": "    ", "body": "        return self.funcs[0]\n", "kind": "value"}


def test_a_body_that_goes_on_into_a_sibling_is_cut_before_it_at_the_bodys_depth():
    reply = "```python\n        return self.funcs[0]\n\n    def second(self):\n        return self.funcs[1]\n```"
    assert python_body(TASK, reply) == "        return self.funcs[0]\n"


def test_a_dedented_line_that_starts_no_definition_does_not_cut_the_body():
    reply = (
        "```python\n        if self.funcs:\n    # the class's depth, still the body's comment\n        return 2\n```"
    )
    assert "return 2" in python_body(TASK, reply)
