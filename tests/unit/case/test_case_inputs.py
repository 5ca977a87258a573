"""Bad inputs a new user meets (issue 18): each is one CaseError naming the file and the fix,
within seconds and bounded memory; never a hang, a traceback or a MemoryError."""

from __future__ import annotations

import errno
import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.case import (
    MAX_CASE_BYTES,
    MAX_RULE_BYTES,
    Case,
    InjectArgs,
    _yaml,
    find_case_files,
    load_case,
    load_case_text,
)
from harness.errors import CaseError

ROOT = Path(__file__).resolve().parents[3]
GOOD = ROOT / "tests" / "data" / "cases" / "good"
HEAD = "system: kafka\ncluster: kafka-zk\n"
RULE = "RULE mine\nCLASS x.Y\nMETHOD z\nAT ENTRY\nIF true\nDO traceln(\"HIT mine\")\nENDRULE\n"
AS_ROOT = pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                             reason="permission bits do not stop root")


def _load_error(path: str | Path) -> CaseError:
    with pytest.raises(CaseError) as info:
        load_case(path)
    return info.value


def _in_thread(fn: Callable[[], Any], timeout: float = 10.0) -> Any:
    """``fn()``'s result or exception, failing the test if it does not end within ``timeout``."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still running after {timeout}s (blocked?)"
    return out[0]


# -- size ----------------------------------------------------------------------------------
def _steps_case(size: int) -> str:
    """A valid case of about ``size`` bytes: many small steps (what made validation slow)."""
    step = "  - sleep: 1s\n"
    return HEAD + "steps:\n" + step * ((size - len(HEAD) - 7) // len(step))


def _workloads_case(size: int) -> str:
    """Many named background workloads, then an await naming none of them (the suggestion and
    the list of earlier workloads go over all of them)."""
    lines = [HEAD, "steps:\n"]
    total = sum(map(len, lines)) + 40
    i = 0
    while total < size:
        line = f"  - produce: {{count: 1, background: true, name: load-{i}}}\n"
        lines.append(line)
        total += len(line)
        i += 1
    lines.append("  - await: {workload: load-x}\n")
    return "".join(lines)


def _cpu_seconds(text: str, runs: int = 3) -> float:
    """The least CPU time of ``runs`` validations, with the cyclic garbage collector off: in a
    long pytest session the heap holds every earlier test's objects, and a full collection
    (whose cost is the whole heap's, not this case's) landing in the big case's run made it
    12x the small one's in CI. The algorithm's own cost is what is measured here."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            start = time.thread_time()
            try:
                load_case_text(text)
            except CaseError:
                pass
            best = min(best, time.thread_time() - start)
    finally:
        gc.enable()
    return best


@pytest.mark.parametrize("make", [_steps_case, _workloads_case], ids=["steps", "workloads"])
def test_a_case_just_under_the_limit_validates_fast_and_in_linear_time(
        make: Callable[[int], str]) -> None:
    big = make(MAX_CASE_BYTES - 64)
    small = make(MAX_CASE_BYTES // 4)
    assert MAX_CASE_BYTES - 200 < len(big.encode()) <= MAX_CASE_BYTES
    big_s, small_s = _cpu_seconds(big), _cpu_seconds(small)
    # About 1 s of CPU on a slow machine (was 4 s, and 13 s for 1 MB); 4x the text, about 4x
    # the time (quadratic would be 16x; 9x allows for noise on a loaded machine).
    assert big_s < 3.0, f"{big_s:.2f}s for {len(big)} bytes"
    assert big_s < 9 * small_s + 0.05, f"{small_s:.2f}s -> {big_s:.2f}s for 4x the text"


@pytest.mark.parametrize("unit", ["- " + "[" * 95 + "]" * 95 + "\n", "  - sleep: 1s\n"],
                         ids=["nested", "steps"])
def test_a_syntax_error_at_the_end_of_a_file_under_the_limit(unit: str) -> None:
    # The pure-Python parser (which words errors as documented) would take 10 s on the first;
    # an error this far into a file is worded by libyaml.
    body = unit * ((MAX_CASE_BYTES - 200) // len(unit))
    text = HEAD + "steps:\n" + body + "  - kill9: a: b\n"
    with pytest.raises(CaseError) as info:
        load_case_text(text)
    # timed as the other bound is (collector off, least of 3): a full collection of the long
    # session's heap is not this parse's cost
    assert _cpu_seconds(text) < 3.0
    assert info.value.line == text.count("\n")
    assert info.value.reason.startswith("invalid YAML: ")
    # Early in a file, the error reads as the documentation shows it, whichever the parser.
    with pytest.raises(CaseError, match=r"^<string>:4: invalid YAML: mapping values are not "
                                        r"allowed here$"):
        load_case_text(HEAD + "steps:\n  - kill9: a: b\n" + body)


def test_a_file_over_the_limit_is_refused_before_it_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:  # 50 MB, sparse: no disk used
        f.truncate(50 * 1024 * 1024)
    just_over = tmp_path / "over.yaml"
    just_over.write_text(_steps_case(MAX_CASE_BYTES + 100), encoding="utf-8")

    def no_read(*args: object) -> bytes:
        raise AssertionError("read a file over the limit")

    monkeypatch.setattr(os, "read", no_read)
    start = time.monotonic()
    err = _load_error(huge)
    assert time.monotonic() - start < 2
    assert (err.path, err.line) == (str(huge), None)
    assert str(err).startswith(f"{huge}: the case file is too large (52428800 bytes): at most "
                               f"{MAX_CASE_BYTES} bytes (256 KiB)")
    assert "is it the right file?" in str(err)
    assert "too large" in str(_load_error(just_over))


def test_a_file_that_grows_past_its_size_is_read_only_up_to_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The file says it is small when looked at, then has 1 MB when read (it grew, or it is a
    # /proc-like file): at most limit + 1 bytes are read.
    path = tmp_path / "growing.yaml"
    path.write_text(_steps_case(1024 * 1024), encoding="utf-8")
    real_stat, real_fstat, real_read = os.stat, os.fstat, os.read
    read = [0]

    def small(result: os.stat_result) -> os.stat_result:
        values = list(result)
        values[6] = 100  # st_size
        return os.stat_result(values)

    def counting_read(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        read[0] += len(data)
        return data

    monkeypatch.setattr(os, "stat", lambda p, *a, **k: small(real_stat(p, *a, **k)))
    monkeypatch.setattr(os, "fstat", lambda fd: small(real_fstat(fd)))
    monkeypatch.setattr(os, "read", counting_read)
    err = _load_error(path)
    assert f"too large (over {MAX_CASE_BYTES} bytes)" in str(err)
    assert read[0] == MAX_CASE_BYTES + 1


def test_case_text_over_the_limit() -> None:
    with pytest.raises(CaseError, match=r"^inline\.yaml: the case text is too large \("):
        load_case_text(HEAD + "description: " + "é" * MAX_CASE_BYTES + "\n", "inline.yaml")


# -- not a regular file, unreadable paths -----------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    err = _in_thread(lambda: _load_error(fifo))
    assert str(err) == (f"{fifo}: the case file is a FIFO (named pipe), not a regular file "
                        "(name a regular file)")
    # A directory does not offer it (only regular files are case files) ...
    (tmp_path / "ok.yaml").write_text(HEAD + "steps: [{kill9: leader}]\n", encoding="utf-8")
    assert find_case_files([tmp_path]) == [tmp_path / "ok.yaml"]
    # ... and a rule file cannot be one either.
    os.mkfifo(tmp_path / "rule.btm")
    rule_err = _in_thread(lambda: _rule_error(tmp_path, "rule.btm"))
    assert "is a FIFO (named pipe), not a regular file" in str(rule_err)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused(device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    err = _in_thread(lambda: _load_error(device))
    assert str(err) == (f"{device}: the case file is a character device, not a regular file "
                        "(name a regular file)")


def test_a_directory_is_not_a_case_file(tmp_path: Path) -> None:
    assert "the case file is a directory, not a regular file" in str(_load_error(tmp_path))


def test_a_path_component_over_255_bytes(tmp_path: Path) -> None:
    path = tmp_path / ("a" * 300) / "case.yaml"
    err = _load_error(path)
    assert str(err) == (f"{path}: cannot read the case file: File name too long (each part of "
                        "a path may have at most 255 bytes)")
    with pytest.raises(CaseError, match="File name too long"):
        find_case_files([path])


@AS_ROOT
def test_a_directory_without_search_permission(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "c.yaml").write_text(HEAD + "steps: [{kill9: leader}]\n", encoding="utf-8")
    locked.chmod(0o600)
    try:
        assert "Permission denied" in str(_load_error(locked / "c.yaml"))
        with pytest.raises(CaseError, match="Permission denied"):
            find_case_files([locked / "c.yaml"])
    finally:
        locked.chmod(0o700)


def test_permission_denied_is_a_case_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What a user without permission gets (simulated: the tests may run as root).
    path = tmp_path / "locked" / "c.yaml"

    def denied(p: object, *args: object, **kwargs: object) -> os.stat_result:
        raise PermissionError(errno.EACCES, "Permission denied", str(p))

    monkeypatch.setattr(os, "stat", denied)
    err = _load_error(path)
    assert str(err) == (f"{path}: cannot read the case file: Permission denied (make the file "
                        "readable and the directories above it searchable)")
    with pytest.raises(CaseError) as info:
        find_case_files([path])
    assert str(info.value) == (f"{path}: Permission denied (make the file readable and the "
                               "directories above it searchable)")


def test_an_unreadable_directory_below_is_a_case_error(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text("", encoding="utf-8")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path).name == "sub":
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(CaseError) as info:
        find_case_files([tmp_path])
    assert str(info.value).startswith(f"{tmp_path / 'sub'}: cannot read the directory: "
                                      "Permission denied")


# -- paths that name nothing ---------------------------------------------------------------------
def test_paths_that_name_no_case_file(tmp_path: Path) -> None:
    with pytest.raises(CaseError, match=r"^an empty path was given \(name a case file or a "):
        find_case_files([""])
    with pytest.raises(CaseError) as info:
        find_case_files([tmp_path])
    assert str(info.value) == (f"{tmp_path}: no case files in this directory (case files are "
                               "*.yaml or *.yml, not starting with '_')")
    (tmp_path / "_draft.yaml").write_text("", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    with pytest.raises(CaseError, match="no case files in this directory"):
        find_case_files([tmp_path])
    with pytest.raises(CaseError) as info:
        find_case_files([tmp_path / "_draft.yaml", tmp_path / "missing.yaml"])
    assert str(info.value) == f"{tmp_path / 'missing.yaml'}: No such file or directory (check the path)"


# -- YAML: depth, parsers, bounded messages ----------------------------------------------------
@pytest.mark.parametrize("text", [
    "[" * 200_000,
    "a:\n" + "".join(" " * (2 * i + 2) + "- b:\n" for i in range(200)),
    "x: " + "{a: " * 150 + "1" + "}" * 150 + "\n",
])
def test_deep_nesting_is_refused_quickly(text: str) -> None:
    # libyaml's composer recurses in C (a segfault at some depth): the tree is built from events.
    start = time.monotonic()
    with pytest.raises(CaseError, match=rf"nested too deeply \(at most {_yaml.MAX_DEPTH} levels\)"):
        load_case_text(text)
    assert time.monotonic() - start < 5


def test_just_deep_enough() -> None:
    depth = _yaml.MAX_DEPTH
    node = _yaml.parse("[" * depth + "]" * depth)
    for _ in range(depth - 1):
        assert node is not None and isinstance(node.value, list)
        node = node.value[0]


def _tree(node: _yaml.Node | None) -> Any:
    if node is None:
        return None
    if isinstance(node.value, list):
        return (node.line, [_tree(n) for n in node.value])
    if isinstance(node.value, dict):
        return (node.line, dict(node.key_lines), {k: _tree(n) for k, n in node.value.items()})
    return (node.line, type(node.value), node.value)


def _pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_yaml, "_FAST", None)


@pytest.mark.skipif(_yaml._FAST is None, reason="PyYAML without libyaml")
def test_libyaml_and_pure_python_build_the_same_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "cases").rglob("*.yaml"))
             + sorted(GOOD.glob("*.yaml"))]
    texts.append("a: &x {b: [1, 2.5, true, ~, '3', 2024-01-01, =]}\nc: *x\n&k d: 1\ne: {*k : 2}\n")
    assert len(texts) > 20
    fast = [_tree(_yaml.parse(t)) for t in texts]
    _pure_python(monkeypatch)
    assert [_tree(_yaml.parse(t)) for t in texts] == fast


@pytest.mark.skipif(_yaml._FAST is None, reason="PyYAML without libyaml")
def test_syntax_errors_read_the_same_with_either_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [HEAD + "steps:\n  - kill9: leader: now\n", HEAD + "steps:\n  - produce: {count: 10\n",
             "a:\n  b: 'open\n", HEAD + "steps: [{kill9: leader}]\n---\nname: x\n", "a: *nope\n",
             "a: &x 1\nb: &x 2\n", "name: \x01\n", "[a, b\n"]

    def errors() -> list[tuple[int | None, str]]:
        found = []
        for text in texts:
            with pytest.raises(CaseError) as info:
                _yaml.parse(text)
            found.append((info.value.line, info.value.reason))
        return found

    fast = errors()
    _pure_python(monkeypatch)
    assert errors() == fast
    assert fast[0] == (4, "invalid YAML: mapping values are not allowed here")


def test_without_libyaml_cases_still_load(monkeypatch: pytest.MonkeyPatch) -> None:
    _pure_python(monkeypatch)
    case = load_case(GOOD / "custom-rule.yaml")
    assert isinstance(case, Case)
    with pytest.raises(CaseError, match="nested too deeply"):
        load_case_text("[" * 5000)


def test_error_messages_stay_short() -> None:
    text = _workloads_case(MAX_CASE_BYTES // 4)
    with pytest.raises(CaseError) as info:
        load_case_text(text)
    message = str(info.value)
    assert "no background workload 'load-x' before this step (earlier: load-0, load-1," in message
    assert "more)" in message and len(message) < 600
    keys = ", ".join(f"k{i}: 1" for i in range(5000))
    with pytest.raises(CaseError) as info:
        load_case_text(HEAD + "steps:\n  - {" + keys + "}\n")
    assert "got 5000 keys: k0, k1," in str(info.value) and len(str(info.value)) < 600


# -- rule files ----------------------------------------------------------------------------------
def _case_with_rule(directory: Path, rule: str, point: str = "mine") -> Path:
    case = directory / "case.yaml"
    case.write_text(HEAD + f"steps:\n  - inject: {{point: {point}, rule: '{rule}'}}\n",
                    encoding="utf-8")
    return case


def _rule_error(directory: Path, rule: str, point: str = "mine") -> CaseError:
    err = _load_error(_case_with_rule(directory, rule, point))
    assert (err.line, err.field) == (4, "steps[0].inject.rule")
    return err


def test_rule_files_inside_the_case_directory(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "r.btm").write_text(RULE, encoding="utf-8")
    for written in ("rules/r.btm", "./rules/../rules/r.btm", str(tmp_path / "rules" / "r.btm")):
        case = load_case(_case_with_rule(tmp_path, written))
        assert case.steps[0].args == InjectArgs("mine", rule=(tmp_path / "rules" / "r.btm").resolve())


@pytest.mark.parametrize("written", ["../outside.btm", "../../../etc/passwd", "/etc/passwd",
                                     "rules/../../outside.btm"])
def test_rule_files_outside_the_case_directory(tmp_path: Path, written: str) -> None:
    cases = tmp_path / "cases"
    (cases / "rules").mkdir(parents=True)
    (tmp_path / "outside.btm").write_text(RULE, encoding="utf-8")
    err = _rule_error(cases, written)
    assert "is outside the case file's directory" in err.reason
    assert "move it into that directory or below it" in err.reason


def test_a_rule_symlink_pointing_outside(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (tmp_path / "outside.btm").write_text(RULE, encoding="utf-8")
    (cases / "link.btm").symlink_to(tmp_path / "outside.btm")
    assert "is outside the case file's directory" in _rule_error(cases, "link.btm").reason
    (cases / "loop.btm").symlink_to(cases / "loop.btm")
    assert "loop" in _rule_error(cases, "loop.btm").reason.lower()


@pytest.mark.parametrize(("content", "fragment"), [
    (b"\x7fELF\x02\x01\x01\x00\xff\xfe", "is not UTF-8 text (line 1): a rule file is Byteman rules"),
    (b"RULE a\nCLASS b\n", "holds no Byteman rule (a 'RULE <name>' line, the rule, then an "
                           "'ENDRULE' line)"),
    (b"", "holds no Byteman rule"),
    (b"root:x:0:0:root:/root:/bin/bash\n", "holds no Byteman rule"),
    (b"RULE x\n" * (MAX_RULE_BYTES // 7 - 1), "holds no Byteman rule"),
    (b"x" * (MAX_RULE_BYTES + 1), f"is too large ({MAX_RULE_BYTES + 1} bytes)"),
])
def test_bad_rule_file_contents(tmp_path: Path, content: bytes, fragment: str) -> None:
    (tmp_path / "r.btm").write_bytes(content)
    start = time.monotonic()
    err = _rule_error(tmp_path, "r.btm")
    assert time.monotonic() - start < 5
    assert f"rule file {(tmp_path / 'r.btm').resolve()}" in err.reason
    assert fragment in err.reason


def test_rule_files_that_are_missing_or_not_files(tmp_path: Path) -> None:
    (tmp_path / "dir.btm").mkdir()
    assert "is a directory, not a regular file" in _rule_error(tmp_path, "dir.btm").reason
    assert "No such file or directory (check the path)" in _rule_error(tmp_path, "no.btm").reason
    assert "File name too long" in _rule_error(tmp_path, "x" * 300 + ".btm").reason


@pytest.mark.parametrize("point", ["../../tmp/x", "a b", "x" * 33, "1abc", "-x", "a/b", "a.b",
                                   "'$(id)'", "'é'"])
def test_user_point_names_must_be_safe(tmp_path: Path, point: str) -> None:
    (tmp_path / "r.btm").write_text(RULE, encoding="utf-8")
    err = _load_error(_case_with_rule(tmp_path, "r.btm", point))
    assert (err.line, err.field) == (4, "steps[0].inject.point")
    assert "invalid point name" in err.reason
    assert "start with a letter, then letters, digits, '_' or '-'; at most 32 characters" in err.reason


@pytest.mark.parametrize("point", ["A1", "my-truncate", "x" * 32, "b_2"])
def test_user_point_names_that_are_fine(tmp_path: Path, point: str) -> None:
    (tmp_path / "r.btm").write_text(RULE, encoding="utf-8")
    inject = load_case(_case_with_rule(tmp_path, "r.btm", point)).steps[0].args
    assert isinstance(inject, InjectArgs) and inject.point == point


def test_the_shipped_rule_case_still_loads() -> None:
    case = load_case(ROOT / "cases" / "kafka" / "user-rule.yaml")
    inject = case.steps[1].args
    assert isinstance(inject, InjectArgs) and inject.point == "A1"
    assert inject.rule == (ROOT / "cases" / "kafka" / "rules" / "leader-append.btm").resolve()
