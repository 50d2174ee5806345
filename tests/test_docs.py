"""The docs stay in step with the code: every option described, every options table current, every
benchmark results file cited and every cited one present."""

import re
from pathlib import Path

from ferrylm.config.options import fields
from ferrylm.config.options import main as options_main

ROOT = Path(__file__).resolve().parents[1]
RESULTS = [ROOT / "benchmarks" / "results", *sorted((ROOT / "studies").glob("*/results"))]
CITED = re.compile(r"(?:benchmarks|studies/[\w-]+)/results/[A-Za-z0-9_./-]*[A-Za-z0-9_/]")


def _docs() -> dict[Path, str]:
    pages = [
        ROOT / "README.md",
        ROOT / "benchmarks" / "README.md",
        *sorted((ROOT / "studies").glob("*/*.md")),
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs" / "notes").glob("*.md")),
    ]
    return {p: p.read_text() for p in pages}


def test_every_config_key_has_a_description():
    missing = [key for key, info in fields() if not (info.description or "").strip()]
    assert not missing, f"config keys without a description (a docstring under the field): {missing}"


def test_options_tables_are_generated_from_the_config(capsys):
    assert options_main(["--check"]) == 0, capsys.readouterr().out


def test_every_stage_has_a_page_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    for page in ["data", "train", "export", "serve", "eval", "review", "bench", "gpu", "performance"]:
        assert (ROOT / "docs" / f"{page}.md").is_file(), page
        assert f"docs/{page}.md" in readme, f"README.md does not link docs/{page}.md"


def test_readme_reads_in_five_minutes():
    assert len((ROOT / "README.md").read_text().splitlines()) < 120


def test_cited_results_exist_and_every_result_is_cited():
    cited = {c.rstrip("/.") for text in _docs().values() for c in CITED.findall(text)}
    missing = sorted(c for c in cited if not (ROOT / c).exists())
    assert not missing, f"docs cite results that are not there: {missing}"
    # A cited folder (benchmarks/results/<run>/) covers the files inside it: one run's outputs.
    files = {str(p.relative_to(ROOT)) for results in RESULTS for p in results.rglob("*") if p.is_file()}
    uncited = sorted(f for f in files if not any(f == c or f.startswith(c + "/") for c in cited))
    assert not uncited, f"results cited nowhere in README.md, benchmarks/README.md, docs/ or a study's pages: {uncited}"


def test_the_performance_page_is_one_page_of_claims_each_with_its_section():
    page = (ROOT / "docs" / "performance.md").read_text()
    assert len(page.splitlines()) <= 300, "docs/performance.md: the story of a figure goes to a docs/notes/ page"
    headings = [h.lower() for h in re.findall(r"^#{2,3} (.+)$", page, re.M)]
    table = page.split("| claim | today | anchor | section |", 1)[1].split("\n\n", 1)[0]
    for row in table.strip().splitlines()[1:]:
        section = row.rstrip(" |").rsplit("|", 1)[1].strip()
        linked = re.search(r"\]\(([^)]+)\)", section)
        assert (linked and (ROOT / "docs" / linked.group(1)).is_file()) or any(
            section.strip("`").lower() in h for h in headings
        ), f"the claims table names no section: {section}"


def test_every_section_the_code_names_exists():
    # `docs/<page>.md, "<title>"` in a comment or docstring: the page holds a heading or a bold lead of that title
    ref = re.compile(r'((?:docs|studies)/[\w/]+\.md)[,:]? \(?"([^"]+)"')
    sources = [
        *(ROOT / "ferrylm").rglob("*.py"),
        *(ROOT / "ferrylm").rglob("*.yaml"),
        *(ROOT / "benchmarks").rglob("*.py"),
        *(ROOT / "benchmarks").rglob("*.sh"),
        *(ROOT / "studies").rglob("*.py"),
    ]
    missing = []
    for path in sources:
        for page, title in ref.findall(re.sub(r"\n\s*#?\s*", " ", path.read_text())):
            doc = (ROOT / page).read_text() if (ROOT / page).is_file() else ""
            titles = [
                t.strip().lower() for t in re.findall(r"^#{1,4} (.+)$", doc, re.M) + re.findall(r"\*\*([^*]+)\*\*", doc)
            ]
            if not any(t.startswith(title.lower()) for t in titles):
                missing.append(f"{path.relative_to(ROOT)}: {page}, {title!r}")
    assert not missing, missing


def test_every_study_says_its_question_command_and_verdict():
    studies = sorted(p for p in (ROOT / "studies").iterdir() if p.is_dir())
    assert studies
    for study in studies:
        readme = (study / "README.md").read_text() if (study / "README.md").is_file() else ""
        for part in ("**The question.**", "**The verdict**", "**The command.**"):
            assert part in readme, f"{study.relative_to(ROOT)}/README.md lacks {part}"


def test_every_benchmark_script_is_in_the_bench_readme():
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = [p.name for p in (ROOT / "benchmarks").iterdir() if p.suffix in (".py", ".sh")]
    assert len(scripts) <= 25, "benchmarks/ keeps the re-runnable benchmarks; a one-question study goes to studies/"
    assert [s for s in scripts if f"`{s}`" not in readme] == []


def test_the_readmes_times_are_the_performance_pages():
    """Each time the README gives for `make demo` and the test tiers is one the performance page's claim row for
    that command gives: the two cannot drift apart."""
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `(make [\w-]+)`[^|]*\|(.+)\|$", readme, re.M)
    assert {c for c, _ in rows} >= {"make demo", "make test", "make test-slow"}, rows
    page = (ROOT / "docs" / "performance.md").read_text()
    claims = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(make [\w-]+)` on 2 CPU cores \|.*$", page, re.M)}
    for command, cells in rows:
        times = re.findall(r"\d+ min \d\d s", cells)
        assert times or "not measured" in cells, f"README: no time for {command}, nor why not"
        for t in times:
            assert t in claims.get(command, ""), f"README gives {t} for {command}; docs/performance.md's row does not"


XREF = re.compile(r"((?:[\w.-]+/)*[\w.-]+\.md)[,:]? \"([^\"]{3,80})\"")


def test_every_cross_reference_names_a_section_that_exists():
    """`docs/x.md, "Title"` names a heading of that page (or a bold lead, as a numbered rule's): a section that
    moved to a notes page leaves no reference behind."""
    pages = [
        *ROOT.glob("docs/**/*.md"),
        ROOT / "README.md",
        *ROOT.glob("benchmarks/**/README.md"),
        *ROOT.glob("studies/*/*.md"),
    ]
    broken = []
    for src in pages:
        for m in XREF.finditer(src.read_text()):
            name, title = m.group(1), " ".join(m.group(2).split())
            target = next((p for p in (src.parent / name, ROOT / name, ROOT / "docs" / name) if p.is_file()), None)
            if target is None:
                broken.append(f"{src.relative_to(ROOT)}: {name} (no such page)")
                continue
            text = target.read_text()
            heads = [ln.lstrip("#").strip() for ln in text.splitlines() if ln.startswith("#")]
            if not any(h.startswith(title) for h in heads) and f"**{title}" not in text:
                broken.append(f'{src.relative_to(ROOT)}: {name}, "{title}"')
    assert not broken, broken
