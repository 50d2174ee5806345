from ferrylm.source.pairs import extract_pairs

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
        """Methods count, dedented to stand alone.

        :param self: the instance
        """
        a = 1
        return a

    class Inner:
        async def deep(self, x):
            """Nested classes too."""
            y = x
            return y

def outer():
    """An outer function."""
    def inner():
        """Functions nested in functions read their enclosing scope: left out."""
        a = 1
        return a
    return inner
'''


def test_extracts_signature_docstring_and_exact_body():
    pairs = extract_pairs(SRC, "m.py", min_body_lines=2, max_body_lines=30)
    assert [p.source for p in pairs] == ["m.py::scale", "m.py::K.method", "m.py::K.Inner.deep", "m.py::outer"]
    p = pairs[0]
    assert (
        p.prompt_code
        == '@decorator\ndef scale(values, factor=2):\n    """Multiply every value by factor.\n\n    Returns a new list.\n    """\n'
    )
    assert p.body == "    out = []\n    for v in values:\n        out.append(v * factor)\n    return out\n"
    # prompt + body is the original function, so the pair is executable code.
    assert p.prompt_code + p.body in SRC
    assert p.summary == "Multiply every value by factor."
    assert p.code == "@decorator\ndef scale(values, factor=2):\n" + p.body


def test_methods_are_dedented_with_their_summary_and_code_without_the_docstring():
    by_name = {p.source: p for p in extract_pairs(SRC, "m.py", 2, 30)}
    m = by_name["m.py::K.method"]
    assert m.prompt_code.startswith('def method(self):\n    """Methods count')
    assert m.body == "    a = 1\n    return a\n"
    assert m.summary == "Methods count, dedented to stand alone."
    assert m.code == "def method(self):\n    a = 1\n    return a\n"
    deep = by_name["m.py::K.Inner.deep"]
    assert deep.code == "async def deep(self, x):\n    y = x\n    return y\n" and deep.summary == "Nested classes too."
    assert by_name["m.py::outer"].summary == "An outer function."


def test_python_methods_of_a_real_standard_library_file():
    import sysconfig
    from pathlib import Path

    text = (Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py").read_text()
    pairs = extract_pairs(text, "json/decoder.py", 2, 30)
    assert [p.source.split("::")[1] for p in pairs] == [
        "JSONDecoder.__init__",
        "JSONDecoder.decode",
        "JSONDecoder.raw_decode",
    ]
    assert pairs[1].summary == (
        "Return the Python representation of ``s`` (a ``str`` instance containing a JSON document)."
    ).replace("``", "")
    assert all(p.code.startswith("def ") and '"""' not in p.code for p in pairs)


def test_body_length_limits_and_bad_source():
    assert [p.source for p in extract_pairs(SRC, "m.py", min_body_lines=5, max_body_lines=30)] == ["m.py::outer"]
    assert [p.source for p in extract_pairs(SRC, "m.py", min_body_lines=1, max_body_lines=3)] == [
        "m.py::K.method",
        "m.py::K.Inner.deep",
    ]
    assert extract_pairs("def broken(:\n", "b.py", 1, 30) == []


def test_python_is_parsed_one_thread_at_a_time(monkeypatch):
    """CPython 3.11's AST constructor keeps one recursion count for all threads: a parse switched out mid-way
    (a finalizer) fails another's with "recursion depth mismatch". The finder proves functions on threads, so
    every parse in the package goes through pairs.parse, which holds one lock."""
    import ast
    import time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from ferrylm.source import pairs

    inside, most, real = [0], [0], ast.parse

    def slow(*args, **kwargs):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.01)  # long enough for the other threads to come in, were the door open
        inside[0] -= 1
        return real(*args, **kwargs)

    monkeypatch.setattr(ast, "parse", slow)
    with ThreadPoolExecutor(4) as pool:
        trees = list(pool.map(lambda i: pairs.parse(f"x = {i}"), range(16)))
    assert most[0] == 1 and [t.body[0].value.value for t in trees] == list(range(16))
    root = Path(pairs.__file__).parents[1]
    elsewhere = [p for p in root.rglob("*.py") if p != Path(pairs.__file__) and "ast.parse(" in p.read_text()]
    assert not elsewhere, f"ast.parse outside pairs.parse: {elsewhere}"
