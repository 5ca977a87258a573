"""Runs the compose CLI (v2 plugin where present, otherwise Debian's docker-compose v1)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import BackendError

__all__ = ["compose_command", "compose"]


@functools.lru_cache(maxsize=1)
def compose_command() -> tuple[str, ...]:
    """The compose invocation available here."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ("docker", "compose")
    if shutil.which("docker-compose"):
        return ("docker-compose",)
    raise BackendError("no compose found: run bin/setup (installs Debian's docker-compose), "
                       "or install the docker compose v2 plugin")


def compose(project: str, file: Path, args: list[str], env: Mapping[str, str],
            timeout: float = 600, overrides: Sequence[Path] = ()) -> str:
    """``compose -p project -f file [-f override...] args...`` with ``env`` added; output,
    or BackendError."""
    files = [a for f in (file, *overrides) for a in ("-f", str(f))]
    cmd = [*compose_command(), "-p", project, *files, *args]
    full_env = {**os.environ, **env}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BackendError(f"`{' '.join(cmd)}` did not finish in {timeout:.0f}s") from exc
    if out.returncode != 0:
        text = (out.stderr or out.stdout).strip().splitlines()
        shown = " ".join(cmd[-len(args) - len(files) - 2:])
        raise BackendError(f"`{shown}` failed: " + " | ".join(text[-4:])[:800])
    return out.stdout
