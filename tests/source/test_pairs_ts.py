"""Doc comment → body pairs for the other seed languages, via tree-sitter."""

import pytest

from ferrylm.source.pairs_ts import extract_pairs_ts

JAVA = """package x;

public class MathUtil {
    /**
     * Returns the larger of two ints.
     */
    @Override
    public static int max(int a, int b) {
        if (a > b) {
            return a;
        }
        return b;
    }

    // not a javadoc
    public int noDoc(int a) {
        int b = a;
        return b;
    }
}
"""
GO = """package main

// Sum adds the numbers in xs.
// It returns 0 for an empty slice.
func Sum(xs []int) int {
	total := 0
	for _, x := range xs {
		total += x
	}
	return total
}
"""
RUST = """/// Returns the square of x.
#[inline]
pub fn square(x: i64) -> i64 {
    let y = x * x;
    y
}
"""
C = """/* Swap two ints. */
static void swap(int *a, int *b) {
    int t = *a;
    *a = *b;
    *b = t;
}
"""
CPP = """namespace n {
// Clamp v into [lo, hi].
template <typename T>
T clamp(T v, T lo, T hi) {
    if (v < lo) return lo;
    return v > hi ? hi : v;
}
}
"""

EXPECTED = {
    "java": (
        "f::MathUtil.max",  # a method named with its class
        "    /**\n     * Returns the larger of two ints.\n     */\n    @Override\n    public static int max(int a, int b) {\n",
        "        if (a > b) {\n            return a;\n        }\n        return b;\n    }\n",
    ),
    "go": (
        "f::Sum",
        "// Sum adds the numbers in xs.\n// It returns 0 for an empty slice.\nfunc Sum(xs []int) int {\n",
        "\ttotal := 0\n\tfor _, x := range xs {\n\t\ttotal += x\n\t}\n\treturn total\n}\n",
    ),
    "rust": (
        "f::square",
        "/// Returns the square of x.\n#[inline]\npub fn square(x: i64) -> i64 {\n",
        "    let y = x * x;\n    y\n}\n",
    ),
    "c": (
        "f::swap",
        "/* Swap two ints. */\nstatic void swap(int *a, int *b) {\n",
        "    int t = *a;\n    *a = *b;\n    *b = t;\n}\n",
    ),
    "cpp": (
        "f::clamp",
        "// Clamp v into [lo, hi].\ntemplate <typename T>\nT clamp(T v, T lo, T hi) {\n",
        "    if (v < lo) return lo;\n    return v > hi ? hi : v;\n}\n",
    ),
}


@pytest.mark.parametrize("lang,src", [("java", JAVA), ("go", GO), ("rust", RUST), ("c", C), ("cpp", CPP)])
def test_doc_comment_functions_become_pairs(lang, src):
    pairs = extract_pairs_ts(src, "f", lang, 2, 30)
    assert [(p.source, p.prompt_code, p.body) for p in pairs] == [EXPECTED[lang]]  # undocumented ones skipped
    assert pairs[0].prompt_code + pairs[0].body in src  # exact text of the file


def test_body_length_limits_and_broken_code():
    assert extract_pairs_ts(GO, "f", "go", 2, 3) == []  # body of 5 lines > 3
    assert extract_pairs_ts("/// doc\nfn broken( {{{{", "f", "rust", 1, 30) == []  # no crash on bad syntax
