"""Reading ``result.json`` from a corrupted run directory (issue 56): a FIFO or a device is
refused by its type before it is opened, a file over the cap by its size before it is read,
and a schema this harness does not know is a ResultSchemaError, whatever the file holds."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from harness.errors import InputError, ResultError, ResultSchemaError
from harness.result import MAX_RESULT_BYTES, SCHEMA, RunResult, open_input, size_text

FIFO = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def _read_in_a_thread(run_dir: Path, seconds: float = 10) -> BaseException | RunResult:
    """``RunResult.read(run_dir)``, failing the test if it has not returned in ``seconds``
    (a FIFO nobody writes would block its ``open`` for ever)."""
    out: list[BaseException | RunResult] = []

    def read() -> None:
        try:
            out.append(RunResult.read(run_dir))
        except BaseException as exc:  # handed to the test
            out.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        with open(run_dir / "result.json", "wb"):  # unblocks the reader's open of a FIFO
            pass
        pytest.fail(f"RunResult.read blocked on {run_dir / 'result.json'}")
    return out[0]


@FIFO
def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "result.json")
    err = _read_in_a_thread(tmp_path)
    assert isinstance(err, ResultError)
    assert str(err) == (f"{tmp_path}/result.json: unreadable: a FIFO (named pipe), not a regular file "
                        "(result.json is read only from a regular file)")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_link_to_a_device_is_refused_without_reading_it(tmp_path: Path, device: str) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    (tmp_path / "result.json").symlink_to(device)
    err = _read_in_a_thread(tmp_path)
    assert isinstance(err, ResultError)
    assert str(err).startswith(f"{tmp_path}/result.json: unreadable: a character device, not a "
                               "regular file")


def test_a_file_over_the_cap_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    with path.open("wb") as fh:
        fh.truncate(MAX_RESULT_BYTES + 1)  # sparse: reading it would take memory, not disk
    err = _read_in_a_thread(tmp_path)
    assert isinstance(err, ResultError)
    assert str(err) == (f"{path}: unreadable: 64 MiB ({MAX_RESULT_BYTES + 1} bytes), over the cap of "
                        "64 MiB for result.json (is it the right file?)")


def test_a_file_at_the_cap_is_read(tmp_path: Path) -> None:
    text = json.dumps({"run_id": "r", "schema": SCHEMA})
    (tmp_path / "result.json").write_text(text + " " * (MAX_RESULT_BYTES - len(text)))
    assert RunResult.read(tmp_path) == RunResult("r")


@pytest.mark.parametrize("schema", [3, 999, -1, 0, 3.0])
def test_an_unknown_schema_is_a_schema_error_before_any_field_is_read(schema: float) -> None:
    raw = {"run_id": "r", "schema": schema, "verdict": "a verdict of schema 3", "new_field": [1]}
    with pytest.raises(ResultSchemaError) as err:
        RunResult.from_json(raw, source="runs/r/result.json")
    assert str(err.value) == (
        f"runs/r/result.json: schema {int(schema)}: this harness reads result.json of schema 1 or 2 "
        "only, and neither shows nor rewrites another (a newer harness wrote it, or something else "
        "did): use the harness that wrote it")


@pytest.mark.parametrize("schema", [None, 1, 2])
def test_the_known_schemas_are_read(schema: int | None) -> None:
    raw = {"run_id": "r"} if schema is None else {"run_id": "r", "schema": schema}
    assert RunResult.from_json(raw).schema == (schema or 1)


def test_open_input_names_the_file_and_the_reason(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError) as err:
        open_input(tmp_path / "d", 10, "a history file")
    assert err.value.path == str(tmp_path / "d")
    assert err.value.reason == ("a directory, not a regular file (a history file is read only from a "
                                "regular file)")
    (tmp_path / "f").write_bytes(b"x" * 11)
    with pytest.raises(InputError, match=r"f: 11 bytes \(11 bytes\), over the cap of 10 bytes for a "):
        open_input(tmp_path / "f", 10, "a history file")
    with open_input(tmp_path / "f", 11, "a history file") as fh:
        assert fh.read() == b"x" * 11
    with pytest.raises(FileNotFoundError):
        open_input(tmp_path / "missing", 10, "a history file")


@pytest.mark.parametrize(("n", "text"), [(0, "0 bytes"), (1023, "1023 bytes"), (1024, "1 KiB"),
                                         (64 << 20, "64 MiB"), (int(3.7 * (1 << 30)), "3.7 GiB")])
def test_size_text(n: int, text: str) -> None:
    assert size_text(n) == text
