"""The package's shape, checked: no import cycle between its modules (imports inside functions
count: a cycle hidden in a function is still one), the engine and the export stage import nothing
of serve/, no function is longer than ~60 lines except the GPU kernels, no six lines repeat but the named
parallel ones, and each stage's entry
function lives in its own module (the README's table from command to function), not in `__init__.py`."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ferrylm"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rsplit(".", 1)[0]
                target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                # `from . import x` / `from .pkg import mod` name modules too
                found = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                edges.update(found or ([target] if target in modules else []))
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
        graph[name] = {e for e in edges if e != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def _is_package_edge(a: str, b: str) -> bool:
    """A package's __init__ re-exporting its own submodule, and that submodule importing a sibling
    through the package, is how Python packages work, not a cycle between modules."""
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_import_cycle_between_modules():
    graph = {a: {b for b in bs if not _is_package_edge(a, b)} for a, bs in _graph().items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_engine_and_export_import_nothing_of_serve():
    graph = _graph()
    for name, edges in graph.items():
        if name.startswith(("ferrylm.engine", "ferrylm.export")):
            assert not {e for e in edges if e.startswith("ferrylm.serve")}, (name, edges)


STAGES = ("data", "train", "export", "serve", "eval", "review", "bench")
TOOLS = ("cli", "cli_tools", "pipeline", "__main__", "doctor")  # above the stages: they drive them


def test_no_import_goes_back_up_from_the_core_to_a_stage():
    """The core (config, records, logging, models, the figure helper) is below every stage: it imports none."""
    up = {
        (name, e)
        for name, edges in _graph().items()
        if name.startswith("ferrylm.config") or name.count(".") == 1 and name.split(".")[1] not in (*STAGES, "engine")
        for e in edges
        if e.split(".")[1] in STAGES and name.split(".")[1] not in TOOLS
    }
    assert not up, sorted(up)


# What a stage may import of another: what that stage wrote (its rows, its examples file) or what it runs (the
# endpoint, the Triton layout, the verdict lines, the canary's tasks). What two stages both know about source code
# lives below them, in ferrylm/source/; the records' reader (read_jsonl) in the core.
INTERFACES = {
    "ferrylm.data.encode": "the tokenized rows (load_rows, ArrowRows) training, export's calibration and bench read",
    "ferrylm.data.shots": "the few-shot examples file the data stage writes and the eval's few-shot base reads",
    "ferrylm.serve": "the endpoint the eval starts and stops",
    "ferrylm.serve.client": "the endpoint's client the eval asks through",
    "ferrylm.serve.process": "the served process the review drives",
    "ferrylm.serve.stage": "the endpoint bench's load test starts",
    "ferrylm.export.triton": "the Triton repository's layout the eval serves",
    "ferrylm.export.onnx": "the exported graph bench's decode benchmark runs",
    "ferrylm.review": "the review the eval's report ends with",
    "ferrylm.review.verdict": "the verdict lines the report leads with",
    "ferrylm.eval.tasks.benchmark": "the canary's tasks, asked while training",
    "ferrylm.eval.tasks.humaneval": "the canary's tasks, asked while training",
}


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def _crossings(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Each import of one stage's module by another stage's, but the named interfaces."""
    return {
        (a, e)
        for a, edges in graph.items()
        for e in edges
        if _stage(a) and _stage(e) and _stage(a) != _stage(e) and e not in INTERFACES
    }


def test_a_stage_imports_of_another_only_what_it_wrote_or_runs():
    assert _crossings(_graph()) == set()
    assert set(INTERFACES) <= set(_graph()), "an interface named that no longer exists: take it out"


def test_a_crossing_is_found():
    graph = {"ferrylm.eval.repo.tasks": {"ferrylm.data.spans", "ferrylm.source.spans", "ferrylm.data.shots"}}
    assert _crossings(graph) == {("ferrylm.eval.repo.tasks", "ferrylm.data.spans")}


def test_what_we_know_of_source_code_imports_no_stage():
    up = {(a, e) for a, edges in _graph().items() if a.startswith("ferrylm.source") for e in edges if _stage(e)}
    assert up == set()


def _private_crossings() -> list[str]:
    """A name with a leading underscore imported from another package (a subpackage counts as another)."""
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level:
                continue
            base = package
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            target = f"{base}.{node.module}" if node.module else base
            home = (
                target
                if target == package or (PACKAGE.parent / target.replace(".", "/")).is_dir()
                else target.rsplit(".", 1)[0]
            )
            found += [
                f"{name}: {a.name} of {target}"
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__") and home != package
            ]
    return found


def test_no_private_name_crosses_a_package():
    assert _private_crossings() == []


def test_a_found_cycle_is_reported():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_function_over_60_lines_but_the_gpu_kernels():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kernel = any("jit" in ast.unparse(d) for d in node.decorator_list)
                if node.end_lineno - node.lineno + 1 > 60 and not kernel:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []


# Six or more identical lines (blank and comment lines aside) in two places of the package: one piece of
# code should serve both. Kept, and why:
PARALLEL = {
    # the bf16 and 4-bit matrix-vector kernels: Triton spells a kernel's parameters one by one (no struct
    # arguments; their launchers pass one `Launch` and one `Epilogue`)
    ("engine/kernels/gemv.py", "engine/kernels/gemv4_kernel.py"): "the two Triton kernels' parameter lists"
}


def _repeated(files: dict[str, str], run: int = 6) -> set[tuple[str, str]]:
    """The pairs of files (a file with itself too) sharing `run` identical lines that are not trivially short."""
    seen: dict[tuple[str, ...], str] = {}
    pairs = set()
    for name, text in sorted(files.items()):
        lines = [s for s in (line.strip() for line in text.splitlines()) if s and not s.startswith("#")]
        for i in range(len(lines) - run + 1):
            window = tuple(lines[i : i + run])
            if sum(map(len, window)) < 60:  # six closing brackets or `x,` lines are not code to share
                continue
            if window in seen:
                pairs.add((seen[window], name))
            seen.setdefault(window, name)
    return pairs


def test_no_six_lines_repeat_in_the_package_but_the_named_parallel_ones():
    files = {str(p.relative_to(PACKAGE)): p.read_text() for p in PACKAGE.rglob("*.py")}
    assert _repeated(files) - set(PARALLEL) == set()
    assert set(PARALLEL) <= _repeated(files), "a pair named in PARALLEL no longer repeats: take it out"


def test_a_repeated_block_is_found():
    block = "".join(f"value_{i} = compute_something(value_{i - 1}, {i})\n" for i in range(6))
    assert _repeated({"a.py": "x = 1\n" + block, "b.py": block + "y = 2\n", "c.py": block[:-30]}) == {("a.py", "b.py")}


def test_each_stage_lives_in_its_own_module_and_init_only_re_exports():
    readme = (PACKAGE.parent / "README.md").read_text()
    table = re.findall(r"\| `ferrylm (\w+)` \|.*\| `(ferrylm/[\w/]+\.py): (\w+)` \|", readme)
    assert {stage for stage, _, _ in table} == {"data", "train", "export", "serve", "eval", "review", "bench"}
    for stage, path, function in table:
        tree = ast.parse((PACKAGE.parent / path).read_text())
        assert function == f"run_{stage}" and function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        init = ast.parse((PACKAGE / stage / "__init__.py").read_text())
        defined = [n.name for n in init.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert defined in ([], ["__getattr__"]), (stage, defined)  # train's loads its recipe on first use


SCRIPTS = [PACKAGE.parent / "benchmarks", PACKAGE.parent / "studies"]  # run, never imported by the package


def _scripts() -> list[Path]:
    return sorted(p for folder in SCRIPTS for p in folder.rglob("*.py"))


def _imported(path: Path) -> list[str]:
    return [
        name
        for node in ast.walk(ast.parse(path.read_text()))
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else []
        )
    ]


def test_no_benchmark_script_edits_sys_path():
    # they run with the package installed (.venv/bin/python benchmarks/x.py) or on PYTHONPATH, never by editing it
    assert [p.name for p in _scripts() if "sys.path" in p.read_text()] == []


def test_no_benchmark_script_imports_another():
    # what benchmarks share (shapes, helpers) lives in ferrylm/bench/; a study's scripts share its own
    # common.py (they run from its folder), never another study's or a benchmark's
    importing = []
    for path in _scripts():
        mine = {"common"} if path.parts[-3] == "studies" else set()
        others = {p.stem for p in _scripts() if p.parent != path.parent or p.stem not in mine}
        importing += [f"{path} imports {n}" for n in _imported(path) if n.split(".")[0] in others - mine]
    assert importing == []


def test_nothing_of_the_package_or_the_tests_imports_a_study():
    studies = {p.stem for p in (PACKAGE.parent / "studies").rglob("*.py")} | {"studies"}
    found = [
        f"{path} imports {n}"
        for path in [*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "tests").rglob("*.py")]
        for n in _imported(path)
        if n.split(".")[0] in studies
    ]
    assert found == []


def _package_names(tree: ast.AST) -> set[str]:
    """The names a script binds to ferrylm's modules and objects (`from ferrylm.x import y`, `import ferrylm.x as y`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ferrylm"):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name.startswith("ferrylm") and a.asname}
    return names


def test_scripts_drive_the_package_by_its_public_names():
    # a benchmark or a study that needs the engine's state asks a named, tested hook (Engine.prefill, position,
    # recapture, capture_at, captured, run_eagerly; decode_step.words, prefetch_block; gemv4_kernel.kernel), so a
    # refactor keeps them working
    engine_objects = {"engine", "decode_step", "decoder"}
    reaching = []
    for path in _scripts():
        tree = ast.parse(path.read_text())
        watched = engine_objects | _package_names(tree)
        reaching += [
            f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in watched
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ]
    assert reaching == []


def test_every_name_a_benchmark_script_takes_from_ferrylm_exists():
    # the scripts run on machines the suite never sees (a GPU): at least what they import from the package is there
    import importlib

    missing = []
    for path in _scripts():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("ferrylm"):
                module = importlib.import_module(node.module)
                missing += [
                    f"{path.relative_to(PACKAGE.parent)}: {node.module}.{a.name}"
                    for a in node.names
                    if not hasattr(module, a.name) and importlib.util.find_spec(f"{node.module}.{a.name}") is None
                ]
    assert missing == []
