"""The data stage's report: files by language and priority, drops by reason, duplicates, secrets,
tokens, and a histogram of example lengths (PNG)."""

from __future__ import annotations

from pathlib import Path

from ..figure import pyplot
from ..manifest import write_json_atomic, write_text_atomic


def length_histogram(lengths: list[int], path: Path, title: str) -> Path:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=110)
    ax.hist(lengths, bins=min(50, max(5, len(set(lengths)))), color="#4472c4")
    ax.set_xlabel("tokens per example")
    ax.set_ylabel("examples")
    ax.set_title(title)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path


def _table(title: str, counts: dict, unit: str = "files") -> list[str]:
    if not counts:
        return []
    lines = [f"### {title}", "", f"| | {unit} |", "|---|---:|"]
    lines += [f"| {k} | {v:,} |" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])]
    return lines + [""]


def _tasks(counts: dict) -> list[str]:
    """Examples per task and language, train and eval side by side (keys "split/task/language")."""
    if not counts:
        return []
    rows = sorted({tuple(k.split("/")[1:]) for k in counts})
    lines = ["### Examples by task and language", "", "| task | language | train | eval |", "|---|---|---:|---:|"]
    lines += [
        f"| {t} | {lang} | {counts.get(f'train/{t}/{lang}', 0):,} | {counts.get(f'eval/{t}/{lang}', 0):,} |"
        for t, lang in rows
    ]
    return lines + [""]


def write_report(out: Path, stats: dict, lengths: list[int]) -> dict:
    """stats.json, stats.md and lengths.png in `out`; returns their paths."""
    paths = {"stats_json": out / "stats.json", "stats_md": out / "stats.md"}
    write_json_atomic(paths["stats_json"], stats)
    if lengths:
        paths["length_histogram"] = length_histogram(
            lengths, out / "lengths.png", f"{stats.get('format', '')} examples by length"
        )
    mb_seen = stats.get("bytes_seen", 0) / 1e6
    lines = [
        "# Data report",
        "",
        f"- format: {stats.get('format')}",
        f"- files: {stats.get('files_seen', 0):,} seen ({mb_seen:,.1f} MB), {stats.get('files_kept', 0):,} kept "
        f"({stats.get('bytes_kept', 0) / 1e6:,.1f} MB)",
        f"- duplicates removed: {stats.get('exact_duplicates_removed', 0):,} exact, "
        f"{stats.get('near_duplicates_removed', 0):,} near",
        f"- secrets scrubbed: {sum(stats.get('secrets_scrubbed', {}).values()):,} "
        f"in {stats.get('files_with_secrets', 0):,} files {stats.get('secrets_scrubbed', {})}",
        f"- examples: {stats.get('train_examples', 0):,} train / {stats.get('eval_examples', 0):,} eval; "
        f"tokens: {stats.get('train_tokens', 0):,} train / {stats.get('eval_tokens', 0):,} eval",
        f"- repositories: {stats.get('train_repositories', 0):,} train / {stats.get('eval_repositories', 0):,} eval",
        f"- tokenizer engine: {stats.get('tokenizer_engine', '-')}; packed: {stats.get('packed', False)}"
        + (f", rows {stats['packed_rows']:,}, fill {stats['pack_fill']:.1%}" if stats.get("packed") else ""),
        f"- elapsed: {stats.get('elapsed_s', 0):.1f} s ({stats.get('mb_per_s', 0):.2f} MB/s of input)",
        "",
    ]
    lines += _table("Files by language", stats.get("files_by_language", {}))
    lines += _table("Files by priority", stats.get("files_by_priority", {}))
    lines += _table("Files dropped, by reason", stats.get("files_dropped", {}))
    lines += _table("Rows dropped, by reason", stats.get("rows_dropped", {}), "rows")
    lines += _table(
        "Functions with a doc comment (pairs), by language", stats.get("pairs_by_language", {}), "functions"
    )
    lines += _tasks(stats.get("examples_by_task", {}))
    lines += _table(
        "Files whose pairs could not be read (kept as code), by reason", stats.get("pair_extraction_failures", {})
    )
    if lengths:
        lines += ["![lengths](lengths.png)", ""]
    write_text_atomic(paths["stats_md"], "\n".join(lines))
    return {k: str(v) for k, v in paths.items()}
