"""The explain task's target: a doc comment's summary, cleaned the same way in all five languages,
and the methods each language's extractor finds in real files of this machine."""

from pathlib import Path

import pytest

from ferrylm.source.pairs_ts import extract_pairs_ts
from ferrylm.source.summary import comment_text, summary


def test_python_docstring_stops_at_the_first_blank_line_and_markup():
    assert summary("Return the :class:`Path` of ``name``.\n\n:param name: the name\n") == "Return the Path of name."
    assert (
        summary("Split the string at sep\nand return the parts.\nArgs:\n  sep: the separator")
        == "Split the string at sep and return the parts."
    )
    assert summary("Compute the thing.\n\n>>> f(1)\n2") == "Compute the thing."
    assert summary("Short.") == ""  # under three words: no summary
    assert summary("word " * 81) == ""  # a paragraph that long is not a summary


def test_javadoc_inline_tags_html_and_block_tags():
    raw = """/**
     * Returns the {@code sum} of <b>two</b> {@link java.lang.Integer ints}.
     * <p>
     * @param a the first
     * @return the sum
     */"""
    assert comment_text(raw).splitlines()[0] == "Returns the {@code sum} of <b>two</b> {@link java.lang.Integer ints}."
    assert summary(comment_text(raw)) == "Returns the sum of two ints."


def test_rust_go_and_doxygen_comments():
    rust = "/// Adds `x` to the total.\n///\n/// # Examples\n/// ```\n/// t.add(1);\n/// ```"
    assert summary(comment_text(rust)) == "Adds `x` to the total."
    go = "// Reset resets the Builder to be empty.\n// It keeps no memory."
    assert summary(comment_text(go)) == "Reset resets the Builder to be empty. It keeps no memory."
    doxygen = "/**\n *  @brief Inserts a range into the %vector.\n *  @param  position  An iterator.\n */"
    assert summary(comment_text(doxygen)) == "Inserts a range into the %vector."
    assert summary(comment_text("/* Frees the node and its children. */")) == "Frees the node and its children."


# Real files that the Makefile's toolchains target installs (Debian's golang-go and librust-md5-dev) and
# g++'s own headers. Counts pinned: methods (Go receivers, Rust impl functions, C++ members) included.
REAL = [
    ("/usr/lib/go-1.19/src/strings/builder.go", "go", 8, "Builder.Reset", "Reset resets the Builder to be empty."),
    ("/usr/share/cargo/registry/md5-0.7.0/src/lib.rs", "rust", 4, "compute", "Finalize and return the digest."),
    # operator< among them: two lines, its closing brace on the last (`…__y.end()); }`)
    ("/usr/include/c++/12/bits/stl_vector.h", "cpp", 4, "vector::insert", "Inserts a range into the %vector."),
]


@pytest.mark.parametrize("path,language,count,name,first_summary", REAL, ids=[r[1] for r in REAL])
def test_methods_in_real_files(path, language, count, name, first_summary):
    if not Path(path).is_file():
        pytest.skip(f"{path} is not installed here (make toolchains installs it as root)")
    pairs = extract_pairs_ts(Path(path).read_text(), "f", language, 2, 30)
    assert len(pairs) == count
    p = next(p for p in pairs if p.source == f"f::{name}" and p.summary)
    assert p.summary == first_summary
    assert not p.code.startswith((" ", "\t")) and p.body.rstrip().endswith("}") and p.code.rstrip().endswith("}")
    assert "//" not in p.code.splitlines()[0] and "/*" not in p.code.splitlines()[0]


JAVA = """package demo;

/** A counter. */
public class Counter {
    private int n;

    /**
     * Adds {@code k} to the count and returns the new value.
     *
     * @param k how much
     * @return the count
     */
    @Deprecated
    public int add(int k) {
        n += k;
        return n;
    }

    /** Resets the count to zero. */
    public Counter() {
        n = 0;
        log("reset");
    }
}
"""


def test_java_methods_and_constructors_in_a_class():
    pairs = extract_pairs_ts(JAVA, "Counter.java", "java", 2, 30)
    assert [(p.source, p.summary) for p in pairs] == [
        ("Counter.java::Counter.add", "Adds k to the count and returns the new value."),
        ("Counter.java::Counter.Counter", "Resets the count to zero."),
    ]
    assert pairs[0].code == "@Deprecated\npublic int add(int k) {\n    n += k;\n    return n;\n}\n"
