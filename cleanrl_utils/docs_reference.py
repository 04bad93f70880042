"""Keeps the generated parts of the documentation pages in step with the scripts and the results.

A page under `docs/` marks a generated block with two HTML comments; everything between them is rewritten from its
source, and nothing outside them is touched:

    <!-- generated: flags ppo_atari.py -->
    ...the flags table of cleanrl/ppo_atari.py, from its `Args` dataclass...
    <!-- end generated -->

Kinds of block:

- `flags SCRIPT`: one row per field of the script's `Args` dataclass (the fields tyro turns into `--help`): the
  flag(s), the type, the default and the field's docstring, read from the source without importing it.
- `report DIR`: the report that `cleanrl_utils.report` wrote to `benchmark/results/DIR/report.md` (its table with the
  reference column, and the learning-curve images, linked through the `docs/benchmark` link to `benchmark/`).
- `published EXP_NAME`: the published returns of `benchmark/published_returns.csv` for one `exp_name`.

    python -m cleanrl_utils.docs_reference           # rewrite every stale block under docs/
    python -m cleanrl_utils.docs_reference --check   # list stale blocks and exit 1, write nothing
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
SCRIPTS = REPO / "cleanrl"
RESULTS = REPO / "benchmark" / "results"
PUBLISHED = REPO / "benchmark" / "published_returns.csv"

BLOCK = re.compile(r"(<!-- generated: (\w+) ([^\s>]+) -->\n)(.*?)(<!-- end generated -->)", re.DOTALL)
TAG = re.compile(r"add_scalar\(\s*f?\"([^\"]+)\"")


@dataclass(frozen=True)
class Flag:
    """One command-line flag of a script: a field of its `Args` dataclass as tyro exposes it."""

    name: str  # the field, e.g. "env_id"
    annotation: str  # its type as written, e.g. "Optional[str]"
    default: str  # its default as written (the file's stem for `exp_name`), e.g. "2.5e-4"
    help: str  # its docstring, whitespace collapsed

    @property
    def flags(self) -> list[str]:
        """The spellings tyro accepts: `--env-id`; a bool also has its `--no-` form."""
        flag = "--" + self.name.replace("_", "-")
        return [flag, "--no-" + flag[2:]] if self.annotation == "bool" else [flag]


def _segment(lines: list[str], node: ast.AST) -> str:
    """The source text of `node` (`ast.get_source_segment` re-splits the whole file on every call)."""
    if node.lineno == node.end_lineno:
        return lines[node.lineno - 1].encode()[node.col_offset : node.end_col_offset].decode()
    first = lines[node.lineno - 1].encode()[node.col_offset :].decode()
    last = lines[node.end_lineno - 1].encode()[: node.end_col_offset].decode()
    return "".join([first, *lines[node.lineno : node.end_lineno - 1], last])


def script_flags(script: Path) -> list[Flag]:
    """The flags of `script` (a path to a cleanrl script), in the order of its `Args` fields.

    Raises ValueError when the file has no top-level `Args` class or a field has no default."""
    source = script.read_text()
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    args = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args"), None)
    if args is None:
        raise ValueError(f"{script.name} has no top-level `class Args`")
    flags = []
    for i, node in enumerate(args.body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if node.value is None:
            raise ValueError(f"{script.name}: Args.{node.target.id} has no default")
        following = args.body[i + 1] if i + 1 < len(args.body) else None
        doc = ""
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
            doc = " ".join(str(following.value.value).split())
        default = _segment(lines, node.value)
        if "__file__" in default:  # exp_name: the file's stem
            default = script.stem
        flags.append(Flag(node.target.id, _segment(lines, node.annotation), default, doc))
    return flags


def logged_tags(script: Path) -> list[str]:
    """The TensorBoard tags `script` logs with `writer.add_scalar`, sorted; an f-string tag is cut at its first `{`
    (e.g. `charts/episodic_return/` for `f"charts/episodic_return/{name}"`)."""
    return sorted({tag.split("{", 1)[0] for tag in TAG.findall(script.read_text())})


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def flags_table(script: Path) -> str:
    """The markdown table of `script`'s flags (see `script_flags`)."""
    rows = ["| flag | type | default | description |", "|---|---|---|---|"]
    for flag in script_flags(script):
        names = " ".join(f"`{f}`" for f in flag.flags)
        rows.append(f"| {names} | `{_cell(flag.annotation)}` | `{_cell(flag.default)}` | {_cell(flag.help)} |")
    return "\n".join(rows) + "\n"


def report_block(directory: str, page: Path) -> str:
    """The report in `benchmark/results/<directory>/report.md` for a page at `page`: its text without the title,
    headings moved two levels down and image links made relative to the page (through `docs/benchmark`).

    Raises FileNotFoundError when the report does not exist."""
    report = RESULTS / directory / "report.md"
    prefix = os.path.relpath(DOCS / "benchmark" / "results" / directory, page.parent)
    lines = []
    for line in report.read_text().splitlines():
        if line.startswith("# "):
            continue
        if line.startswith("#"):
            line = "##" + line
        line = re.sub(r"\]\(([^):/]+\.png)\)", lambda m: f"]({prefix}/{m.group(1)})", line)
        lines.append(line)
    return "\n".join(lines).strip("\n") + "\n"


def published_block(exp_name: str) -> str:
    """The published returns on file for `exp_name`: a table of env, budget, return and source.

    Raises ValueError when `benchmark/published_returns.csv` has no row for it."""
    with PUBLISHED.open() as f:
        rows = [r for r in csv.DictReader(f) if r["exp_name"] == exp_name]
    if not rows:
        raise ValueError(f"benchmark/published_returns.csv has no row for exp_name {exp_name!r}")
    out = ["| env_id | steps | published return (mean ± std) | source |", "|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['env_id']} | {int(r['steps']):,} | {r['return']} ± {r['std']} | {r['source']} |")
    return "\n".join(out) + "\n"


def render(kind: str, arg: str, page: Path) -> str:
    """The body of one generated block. Raises ValueError for an unknown kind or a missing source."""
    if kind == "flags":
        script = SCRIPTS / arg
        if not script.is_file():
            raise ValueError(f"{page.relative_to(REPO)}: no script cleanrl/{arg}")
        return flags_table(script)
    if kind == "report":
        if not (RESULTS / arg / "report.md").is_file():
            raise ValueError(f"{page.relative_to(REPO)}: no report benchmark/results/{arg}/report.md")
        return report_block(arg, page)
    if kind == "published":
        return published_block(arg)
    raise ValueError(f"{page.relative_to(REPO)}: unknown generated block kind {kind!r}")


def update(text: str, page: Path) -> str:
    """`text` (the content of `page`) with every generated block rewritten from its source."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group(2), m.group(3), page) + m.group(5), text)


def blocks(text: str) -> list[tuple[str, str, str]]:
    """The generated blocks of a page's text as (kind, argument, body)."""
    return [(m.group(2), m.group(3), m.group(4)) for m in BLOCK.finditer(text)]


def pages() -> list[Path]:
    """Every markdown page written for the site; the folders linked into `docs/` (`benchmark`, `cleanrl`,
    `terraform`) are not walked."""
    found = []
    for root, _, files in os.walk(DOCS):  # does not follow the links
        found += [Path(root) / f for f in files if f.endswith(".md")]
    return sorted(found)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cleanrl_utils.docs_reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list the stale pages and exit 1; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text()
        try:
            new = update(text, page)
        except ValueError as e:
            print(f"docs_reference: {e}", file=sys.stderr)
            return 2
        if new != text:
            stale.append(page.relative_to(REPO))
            if not args.check:
                page.write_text(new)
    for page in stale:
        print(f"{'stale' if args.check else 'updated'}: {page}")
    if args.check and stale:
        print("docs_reference: run `python -m cleanrl_utils.docs_reference` to regenerate them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
