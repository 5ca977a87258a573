"""What a check reads, validated before any reading starts (shared by the Spark job and
the reference checker): the run directory, its ``history/*.jsonl`` files and its
optional ``replicas/*.jsonl`` files, each a regular file that can be opened; once read,
the rule that a history of which no line could be read is no history; and where the
lines are that a check could not use (:func:`first_unread`).
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from harness.errors import CheckError
from harness.history import history_files

__all__ = ["first_skipped", "first_unread", "require_lines", "run_files"]

_SHOWN = 5  # problems named in one error
#: the history that :func:`first_skipped` reads (it goes line by line in Python)
SKIPPED_SCAN_BYTES = 64 << 20


def run_files(run_dir: Path) -> tuple[list[Path], list[Path]]:
    """``run_dir``'s history files and replica files, in name order; a
    :class:`CheckError` naming each path that is not a readable regular file, or when
    there is no ``history/`` directory or no history file."""
    if not run_dir.is_dir():
        raise CheckError(f"{run_dir}: not a run directory")
    history = run_dir / "history"
    if not history.is_dir():
        raise CheckError(f"{history}: not a directory" if history.exists() else
                         f"{run_dir}: no history/ directory (not a run directory?)")
    files = history_files(run_dir)
    if not files:
        raise CheckError(f"{run_dir}: no history/*.jsonl files")
    replicas_dir = run_dir / "replicas"
    replicas: list[Path] = []
    problems = []
    if replicas_dir.exists():
        if replicas_dir.is_dir():
            replicas = sorted(replicas_dir.glob("*.jsonl"))
        else:
            problems.append(f"{replicas_dir}: not a directory")
    problems += [p for p in map(_problem, [*files, *replicas]) if p is not None]
    if problems:
        more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        raise CheckError("cannot check the run: " + "; ".join(problems[:_SHOWN]) + more)
    return files, replicas


def _problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file of lines, or None."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:  # a dangling link, no permission on the way
        return f"{path}: cannot be read: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"{path}: a directory, not a file of lines"
    if not stat.S_ISREG(mode):
        return f"{path}: not a regular file"
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return f"{path}: cannot be read: {exc.strerror or exc}"
    return None


def require_lines(run_dir: Path, lines: int, skipped: int) -> None:
    """A :class:`CheckError` when no history line could be read: every line of the
    history files was skipped (``harness.check.lines``), or they hold none."""
    if lines == 0:
        raise CheckError(f"{run_dir}: no history line could be read: the history files hold no lines")
    if skipped >= lines:
        raise CheckError(f"{run_dir}: no history line could be read: all {lines} lines were skipped "
                         "(not JSON objects, or not events of the history contract)")


def first_skipped(run_dir: Path, limit: int = 3, max_bytes: int = SKIPPED_SCAN_BYTES) -> list[str]:
    """Where the first ``limit`` skipped history lines are, as ``history/<file>:<line>
    (<why>)`` (:func:`harness.check.lines.skip_reason`), in file order; nothing when the
    history is larger than ``max_bytes`` (a line-by-line reading in Python: about 2 s for
    25 MB on a slow machine) or cannot be read."""
    return first_unread(run_dir, {"skipped": limit}, max_bytes).get("skipped", [])


def first_unread(run_dir: Path, wanted: Mapping[str, int],
                 max_bytes: int = SKIPPED_SCAN_BYTES) -> dict[str, list[str]]:
    """Where the first lines are that a check could not use, as ``<file>:<line> (<why>)``
    in file order (:func:`harness.check.lines.unused`), up to ``wanted[name]`` of each:
    ``skipped`` (history lines skipped), ``unjudged`` (history lines with sends without a
    message id), ``unjudged-ok`` (those with acknowledged ones), ``replica-skipped``
    (replica lines skipped). Nothing of the history (or of the replicas) when its files
    are larger than ``max_bytes`` together (a line-by-line reading in Python), or cannot
    be read."""
    found: dict[str, list[str]] = {name: [] for name, n in wanted.items() if n > 0}
    for replicas in (False, True):
        names = [name for name in found if (name == "replica-skipped") == replicas]
        if not names:
            continue
        try:
            files = sorted((run_dir / "replicas").glob("*.jsonl")) if replicas else history_files(run_dir)
            if sum(f.stat().st_size for f in files) > max_bytes:
                continue
            for path, number, line in _lines(files):
                for name, why in _unused(line, replicas).items():
                    if name in found and len(found[name]) < wanted[name]:
                        found[name].append(f"{path.relative_to(run_dir)}:{number} ({why})")
                if all(len(found[name]) >= wanted[name] for name in names):
                    break
        except OSError:
            continue
    return found


def _unused(line: bytes, replicas: bool) -> dict[str, str]:
    """What :func:`first_unread` names for one line: the count it is behind, and why."""
    from harness.check.lines import unjudged, unused

    why, sends = unused(line, replicas)
    if why is not None:
        return {"replica-skipped" if replicas else "skipped": why}
    if sends is None:
        return {}
    acks = sends == unjudged("ok") or sends.startswith("oks:")
    return {"unjudged": sends, **({"unjudged-ok": sends} if acks else {})}


def _lines(files: Iterable[Path]) -> Iterator[tuple[Path, int, bytes]]:
    """(file, line number from 1, line without its end) of each line of ``files``."""
    from harness.check.lines import split_lines

    for path in files:
        for number, (_, line) in enumerate(split_lines(path.read_bytes()), start=1):
            yield path, number, line
