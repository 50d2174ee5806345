from ferrylm.data.pairs import extract_pairs

SRC = '''import os

@decorator
def scale(values, factor=2):
    """Multiply every value by factor.

    Returns a new list.
    """
    out = []
    for v in values:
        out.append(v * factor)
    return out

def undocumented(x):
    return x + 1

def stub():
    """Nothing here."""
    pass

class K:
    def method(self):
        """Methods are skipped: the prompt would need the class."""
        a = 1
        return a
'''


def test_extracts_signature_docstring_and_exact_body():
    pairs = extract_pairs(SRC, "m.py", min_body_lines=2, max_body_lines=30)
    assert [p.source for p in pairs] == ["m.py::scale"]
    p = pairs[0]
    assert p.prompt_code == '@decorator\ndef scale(values, factor=2):\n    """Multiply every value by factor.\n\n    Returns a new list.\n    """\n'
    assert p.body == "    out = []\n    for v in values:\n        out.append(v * factor)\n    return out\n"
    # prompt + body is the original function, so the pair is executable code.
    assert p.prompt_code + p.body in SRC


def test_body_length_limits_and_bad_source():
    assert extract_pairs(SRC, "m.py", min_body_lines=5, max_body_lines=30) == []
    assert extract_pairs(SRC, "m.py", min_body_lines=1, max_body_lines=3) == []
    assert extract_pairs("def broken(:\n", "b.py", 1, 30) == []
