"""The user docs serve a user: no work period or commit hash, a short README, and a list of
what CI leaves out that matches pytest's collection.

The rules apply to README.md, docs/*.md, cases/SCHEMA.md and the docstrings and comments of
every module under harness/. The development log, bench/LOG.md, is where work periods and
commits belong, and it is not checked.

- A *numbered work period*: "session 49", "sessions 47 and 48", "Round 2's" (``WORK_PERIOD``).
  A command-line flag such as ``--session 30`` or ``--rounds 3`` is not one.
- A *commit hash*: 7 to 40 lowercase hex digits standing alone, with at least one digit and
  one letter (``COMMIT``). "Standing alone": not joined by ``#`` (a CSS color), ``-`` (a
  UUID's groups, a run id), ``.``, ``/`` or a word character (``0x7fffffff``, a longer hash
  such as a sha256, which is never cut into a shorter match).
- A link to the old place of the log, ``docs/checker-log.md`` (``OLD_LOG``): it is bench/LOG.md.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 250  # the README must stay under this many lines

WORK_PERIOD = re.compile(r"(?<![\w-])(?:sessions?|rounds?)\s+\d+", re.IGNORECASE)
COMMIT = re.compile(
    r"(?<![\w#./-])"          # not joined to what comes before
    r"(?=[0-9a-f]*[0-9])"     # at least one digit
    r"(?=[0-9a-f]*[a-f])"     # at least one letter
    r"[0-9a-f]{7,40}"
    r"(?![\w-])")             # not joined to what comes after
OLD_LOG = re.compile(r"checker-log\.md")

#: The README paragraph that lists the ``full_matrix`` items, and how an item is written
#: there: ``name`` or ``name[entry, entry, ...]`` after a directory such as ``cases/kafka/``.
CI_LEAVES_OUT = "**What CI leaves out.**"
_CODE = re.compile(r"`([^`]+)`")
_ITEM = re.compile(r"^(?P<name>[^\[\]]+?)(?:\[(?P<entries>[^\[\]]*)\])?$")

Item = tuple[str, str | None]  # ("cases/kafka/regressions/kip-101-loss", "0.10.2.2")


# -- the rules ------------------------------------------------------------------------------------
def findings(text: str) -> list[tuple[int, str]]:
    """(line from 1, what was matched) for each work period, commit hash and link to the
    old log in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern in (WORK_PERIOD, COMMIT, OLD_LOG):
            found += [(number, match.group(0)) for match in pattern.finditer(line)]
    return found


def prose_of_module(source: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of every comment and docstring of a module: a string standing
    alone as a statement (module, class, function and attribute docstrings)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            yield node.lineno, node.value.value


def module_findings(path: Path) -> list[str]:
    """``path:line: match`` for each finding in a module's prose."""
    out = []
    for first, text in prose_of_module(path.read_text(encoding="utf-8")):
        for offset, match in findings(text):
            out.append(f"{path.relative_to(ROOT)}:{first + offset - 1}: {match}")
    return out


@pytest.mark.parametrize("text", [
    "measured in session 49", "Session 2; kafka-zk", "sessions 47 and 48", "session 49's claims",
    "Round 1's loose dict", "in round 2", "sessions  42-47",
    "at e90900d, 1023 passed", "(4fdba86 on the same machine)", "a637ba0.", "`cca621c`",
    "commit 9197afd2e52786c25faba", "the fix: 58af9b7c1f0e3d2a4b5c6d7e8f9a0b1c2d3e4f5a",
    "see docs/checker-log.md", "[checker-log.md](checker-log.md)",
])
def test_a_work_period_a_commit_hash_or_the_old_log_is_found(text):
    assert findings(text)


@pytest.mark.parametrize("text", [
    "`python bench/bench_checker.py --session 30`", "--rounds 3", "a pytest session",
    "the sessions of ZooKeeper", "rounded 5 times", "around 30 s", "grounds 4",
    "color: #1f77b4;", "fill='#ff7f0e'", "#d62728",
    "sha256:" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "123e4567-e89b-12d3-a456-426614174000", "run 20261122-013000-kill-leader-ab12",
    "20261122", "deadbeef", "0x7fffffff", "1e308", "offsets 10485760 and 209715200",
])
def test_nothing_else_is_taken_for_one(text):
    assert findings(text) == []


def test_a_finding_names_its_line():
    assert findings("first line\nsecond, at 4fdba86\n") == [(2, "4fdba86")]


def test_a_module_s_comments_and_docstrings_are_read_and_its_code_is_not(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Module.\n\nFrom session 7."""\n'
                      'X = "session 8"  # since a637ba0\n'
                      'def f():\n'
                      '    """Round 3."""\n'
                      '    return "e90900d"\n', encoding="utf-8")
    prose = sorted(prose_of_module(module.read_text(encoding="utf-8")))
    assert prose == [(1, "Module.\n\nFrom session 7."), (4, "# since a637ba0"), (6, "Round 3.")]


# -- the docs -------------------------------------------------------------------------------------
USER_DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "cases" / "SCHEMA.md"]


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_user_doc_names_no_work_period_no_commit_and_not_the_old_log(path):
    found = findings(path.read_text(encoding="utf-8"))
    assert found == [], "\n".join(f"{path.relative_to(ROOT)}:{n}: {m}" for n, m in found)


def test_the_docstrings_and_comments_under_harness_name_no_work_period_no_commit_and_not_the_old_log():
    found = [f for path in sorted((ROOT / "harness").rglob("*.py")) for f in module_findings(path)]
    assert found == [], "\n".join(found)


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines: at most {README_MAX_LINES - 1}"


def test_the_development_log_is_outside_the_user_docs():
    assert (ROOT / "bench" / "LOG.md").is_file()
    assert not (ROOT / "docs" / "checker-log.md").exists()


# -- what CI leaves out ---------------------------------------------------------------------------
def listed_items(readme: str) -> set[Item]:
    """The items of the README's "What CI leaves out" list: one bullet per directory, the
    directory's name first (ending in ``/``), then its cases (a case file's name without
    ``.yaml``) or tests (``file.py::test``), each with the entries left out in brackets, or
    with no brackets for an item that has no entries."""
    start = readme.index(CI_LEAVES_OUT)
    end = readme.find("\n#", start)
    paragraph = readme[start:end if end >= 0 else len(readme)]
    bullets = re.split(r"\n- ", paragraph)[1:]
    assert bullets, f"README.md: no bullets after {CI_LEAVES_OUT}"
    items: set[Item] = set()
    for bullet in bullets:
        codes = [re.sub(r"\s+", " ", code).strip() for code in _CODE.findall(bullet)]
        directories = [code for code in codes if code.endswith("/")]
        assert len(directories) == 1, f"README.md: one directory per bullet, not {directories}: {bullet!r}"
        directory = directories[0]
        for code in codes[codes.index(directory) + 1:]:
            match = _ITEM.match(code)
            assert match, f"README.md: {code!r} is not `name` or `name[entry, ...]`"
            name = directory + match["name"].strip()
            if match["entries"] is None:
                items.add((name, None))
            else:
                items |= {(name, entry.strip()) for entry in match["entries"].split(",")}
    return items


def collected_item(nodeid: str) -> Item:
    """A pytest node id as the README names it: ``cases/kafka/c1.yaml::c1[zk]`` is
    (``cases/kafka/c1``, ``zk``); ``tests/x/test_y.py::test_z[a]`` is
    (``tests/x/test_y.py::test_z``, ``a``)."""
    path, _, rest = nodeid.partition("::")
    entry = None
    if rest.endswith("]") and "[" in rest:
        rest, _, entry = rest[:-1].partition("[")
    name = path.removesuffix(".yaml") if path.endswith(".yaml") else f"{path}::{rest}"
    return name, entry


def test_the_ci_list_is_read_by_directory_case_and_entry():
    readme = ("intro\n\n**What CI leaves out.** These:\n\n"
              "- regressions, `cases/kafka/regressions/`: `kip-101-loss[0.10.2.2,\n"
              "  2.0.1]`, `copier-broken`;\n"
              "- tests, `tests/integration/`: `test_a.py::test_b[c1, s1]` (the points).\n\n"
              "## Next\n- `not/`: `read`\n")
    assert listed_items(readme) == {
        ("cases/kafka/regressions/kip-101-loss", "0.10.2.2"),
        ("cases/kafka/regressions/kip-101-loss", "2.0.1"),
        ("cases/kafka/regressions/copier-broken", None),
        ("tests/integration/test_a.py::test_b", "c1"),
        ("tests/integration/test_a.py::test_b", "s1"),
    }


def test_a_node_id_is_named_as_the_readme_names_it():
    assert collected_item("cases/kafka/regressions/kip-101-loss.yaml::kip-101-loss[0.10.2.2]") == (
        "cases/kafka/regressions/kip-101-loss", "0.10.2.2")
    assert collected_item("cases/pulsar/kill-owner.yaml::kill-owner") == ("cases/pulsar/kill-owner", None)
    assert collected_item("tests/integration/test_points_on_kraft.py::test_on_kraft_39[c1]") == (
        "tests/integration/test_points_on_kraft.py::test_on_kraft_39", "c1")


def test_the_readme_lists_exactly_what_ci_leaves_out():
    """Collection needs no Docker (the plugin turns each case file into items without
    starting anything); it takes a few seconds."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "full_matrix",
         "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pytest --collect-only failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}"
    collected = {collected_item(line.strip()) for line in done.stdout.splitlines() if "::" in line}
    assert collected, f"pytest collected no full_matrix item:\n{done.stdout[-2000:]}"
    listed = listed_items(README.read_text(encoding="utf-8"))
    wrong = [f"listed in README.md, not a full_matrix item: {item}"
             for item in sorted(listed - collected, key=str)]
    wrong += [f"a full_matrix item missing from README.md: {item}"
              for item in sorted(collected - listed, key=str)]
    assert wrong == [], "\n".join(wrong)
