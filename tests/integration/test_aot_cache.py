"""The checker server's AOT cache, for real (harness.check.aot): a training makes it, a new
server maps it (and runs with the young generation's cap), and that server's check finds
what the synthetic history holds; a cache Java refuses is removed."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.check import plan
from harness.check.engine import aot, conf, server, training
from harness.testing.synthetic import Profile, generate


@pytest.fixture()
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state directory of the test's own: its servers, not the session's shared one."""
    monkeypatch.setenv("HARNESS_SPARK_STATE", str(tmp_path / "state"))
    monkeypatch.delenv("HARNESS_SPARK_AOT", raising=False)
    yield tmp_path / "state"
    plan.close()
    server.stop()


def test_a_trained_cache_is_used_by_the_next_server(own_state: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    # the server's start only (checks=0: the 90-s training of a real cache checks a run 3 times)
    cache = training.train(plan.run, plan.close, checks=0, log=lines.append)
    assert cache == aot.cache_file() and cache.is_file() and cache.stat().st_size > 20 << 20
    assert lines[-1].startswith(f"aot: wrote {cache}")
    assert sorted(p.name for p in cache.parent.iterdir()) == [cache.name, "train.lock"]  # nothing else left

    srv = server.ensure()
    cmdline = Path(f"/proc/{srv.jvm_pid}/cmdline").read_bytes().split(b"\0")
    assert f"-XX:AOTCache={cache}".encode() in cmdline
    assert str(cache) in Path(f"/proc/{srv.jvm_pid}/maps").read_text()  # Java mapped it: in use
    # the young generation's cap (conf.young_generation_mib), as the JVM took it
    young = conf.young_generation_mib(conf.mib(conf.driver_memory())) << 20
    jcmd = Path(cmdline[0].decode()).with_name("jcmd")
    flags = subprocess.run([str(jcmd), str(srv.jvm_pid), "VM.flags"], capture_output=True, text=True,
                           timeout=60, check=True).stdout.split()
    assert f"-XX:MaxNewSize={young}" in flags

    run = tmp_path / "run"
    expected = generate(run, Profile(records=500, partitions=2, producers=1, consumers=1, replicas=1,
                                     inject={"lost-write": 1}))
    result = plan.run(run)
    assert result.anomalies == expected.anomalies and result.counts == expected.counts

    # A cache Java cannot use (here truncated) is not used, and the supervisor removes it: the
    # next idle stop trains a new one instead of every server starting without one.
    plan.close()
    server.stop()
    cache.write_bytes(cache.read_bytes()[: 8 << 20])
    srv = server.ensure()
    assert str(cache) not in Path(f"/proc/{srv.jvm_pid}/maps").read_text()
    assert not cache.exists()
    log = (server.server_dir() / "server.log").read_text()
    assert f"the JVM did not use the AOT cache {cache}" in log and "[aot]" in log
