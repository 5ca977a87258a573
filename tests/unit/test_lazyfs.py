"""The lazy disk, mounted for real on the host (FUSE): what a power loss keeps and drops,
torn writes, ENOSPC and EROFS, corruption, and its clean-up."""

from __future__ import annotations

import errno
import mmap
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backend import lazyfs
from harness.backend.lazyfs import FILE_KINDS, LazyDisk
from harness.clusters import DISK_FILE_KINDS
from harness.errors import BackendError

pytestmark = pytest.mark.skipif(lazyfs.available() is not None or os.geteuid() != 0,
                                reason=f"no lazy disk here: {lazyfs.available() or 'not root'}")


@pytest.fixture(scope="module")
def _shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LazyDisk]:
    d = LazyDisk.create(tmp_path_factory.mktemp("lazy") / "node", owner="test", writeback_s=0)
    try:
        yield d
    finally:
        d.destroy()


@pytest.fixture
def disk(_shared: LazyDisk) -> LazyDisk:
    """One disk for the module (a mount takes a second or two), emptied for each test: nothing
    pending, no file, normal mode. Only an fsync makes data durable on it (no write-back)."""
    _shared.set_mode("normal")
    _shared.lose()
    for child in _shared.mount.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    shutil.rmtree(_shared.home / "snapshots", ignore_errors=True)
    return _shared


def _write(path: Path, data: bytes, *, sync: bool, mode: str = "wb") -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def test_a_power_loss_keeps_what_was_synced_and_drops_the_rest(disk: LazyDisk) -> None:
    m = disk.mount
    _write(m / "seg", b"A" * 10_000, sync=True)
    _write(m / "seg", b"B" * 5_000, sync=False, mode="ab")  # an unsynced tail
    with open(m / "seg", "r+b") as f:  # an unsynced overwrite of synced bytes
        f.seek(100)
        f.write(b"X" * 10)
    _write(m / "new", b"never synced", sync=False)
    (m / "d").mkdir()
    _write(m / "d" / "kept", b"k" * 300, sync=True)
    os.rename(m / "d" / "kept", m / "d" / "moved")
    assert {r["file"] for r in disk.unsynced()} == {"/seg", "/new"}

    out = disk.lose()

    assert (m / "seg").read_bytes() == b"A" * 10_000
    assert (m / "new").read_bytes() == b""  # created (the namespace is kept), data lost
    assert (m / "d" / "moved").read_bytes() == b"k" * 300
    seg = next(r for r in out["files"] if r["file"] == "/seg")
    assert (seg["size"], seg["synced_size"], seg["pages_rewritten"]) == (15_000, 10_000, 1)
    assert out["bytes_lost"] >= 5_000 + 12 and out["torn"] is None
    assert disk.unsynced() == []


def test_a_torn_write_keeps_earlier_writes_and_half_the_last(disk: LazyDisk) -> None:
    m = disk.mount
    _write(m / "other", b"o" * 50, sync=False)
    _write(m / "log", b"S" * 1_000, sync=True)
    _write(m / "log", b"1" * 400, sync=False, mode="ab")
    _write(m / "log", b"2" * 400, sync=False, mode="ab")  # the node's last write

    out = disk.lose(torn=True)

    assert (m / "log").read_bytes() == b"S" * 1_000 + b"1" * 400 + b"2" * 200
    assert (m / "other").read_bytes() == b""
    assert out["torn"] == {"file": "/log", "offset": 1_400, "length": 400, "kept": 200}


def test_dirty_mapped_pages_are_lost_too(disk: LazyDisk) -> None:
    path = disk.mount / "idx"
    _write(path, b"\0" * 8192, sync=True)
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 8192) as mapped:
        mapped[0:4] = b"MMAP"  # dirty in the kernel's page cache, never msync'ed
    assert disk.lose()["bytes_lost"] > 0 or path.read_bytes()[:4] == b"\0" * 4
    assert path.read_bytes() == b"\0" * 8192


def test_full_and_readonly_refuse_writes_until_normal(disk: LazyDisk) -> None:
    m = disk.mount
    _write(m / "a", b"x", sync=True)
    disk.set_mode("full")
    with pytest.raises(OSError) as full:
        _write(m / "a", b"more", sync=False, mode="ab")
    assert full.value.errno == errno.ENOSPC
    disk.set_mode("readonly")
    with pytest.raises(OSError) as ro:
        _write(m / "b", b"x", sync=False)
    assert ro.value.errno == errno.EROFS
    assert (m / "a").read_bytes() == b"x"  # reads still work
    disk.set_mode("normal")
    _write(m / "a", b"y", sync=False, mode="ab")
    assert (m / "a").read_bytes() == b"xy"
    with pytest.raises(BackendError, match="unknown mode"):
        disk.set_mode("sideways")


def test_corruption_aims_at_a_file_kind(disk: LazyDisk) -> None:
    seg = disk.mount / "kafka" / "t-0"
    seg.mkdir(parents=True)
    _write(seg / "00000000000000000000.log", b"\x10" * 100, sync=True)
    _write(seg / "00000000000000000000.index", b"i" * 10, sync=True)
    assert disk.files("log") == ["/kafka/t-0/00000000000000000000.log"]
    assert disk.files("index") == ["/kafka/t-0/00000000000000000000.index"]

    flip = disk.corrupt("/kafka/t-0/00000000000000000000.log", "bitflip", 7)
    assert (flip["offset"], flip["old"], flip["new"]) == (7, 0x10, 0x11)
    data = (seg / "00000000000000000000.log").read_bytes()
    assert data[7] == 0x11 and data[:7] == b"\x10" * 7
    cut = disk.corrupt("/kafka/t-0/00000000000000000000.log", "truncate")
    assert cut["cut_to"] == 50 and len((seg / "00000000000000000000.log").read_bytes()) == 50
    with pytest.raises(BackendError, match="outside"):
        disk.corrupt("/kafka/t-0/00000000000000000000.log", "bitflip", 999)
    with pytest.raises(BackendError, match="unknown file kind"):
        disk.files("swap")


def test_snapshot_and_rollback_put_the_directory_back(disk: LazyDisk) -> None:
    m = disk.mount
    _write(m / "a", b"before", sync=True)
    disk.snapshot("s1")
    _write(m / "a", b"after!", sync=True)
    _write(m / "b", b"new", sync=True)
    _write(m / "a", b"after! and more", sync=True)
    with open(m / "a", "r+b") as f:  # an unsynced rewrite: its page's pre-image is kept
        f.write(b"ZZ")
    disk.rollback("s1")
    assert (m / "a").read_bytes() == b"before" and not (m / "b").exists()
    assert disk.unsynced() == [] and disk.lose()["files"] == []  # nothing of before is pending
    assert (m / "a").read_bytes() == b"before"
    with pytest.raises(BackendError, match="no snapshot"):
        disk.rollback("s9")


def test_destroy_unmounts_and_sweep_takes_only_dead_owners(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lazyfs, "DISKS_DIR", tmp_path)
    mine = LazyDisk.create(tmp_path / "chaos-x" / "n1", owner="alive")
    dead = LazyDisk.create(tmp_path / "chaos-x" / "n2", owner="dead")
    try:
        assert lazyfs.sweep(lambda owner: owner == "alive") == [str(dead.home)]
        assert not dead.home.exists() and mine.alive()
    finally:
        mine.destroy()
    assert not os.path.ismount(mine.mount) and not mine.home.exists()
    mine.destroy()  # idempotent


def test_the_file_kinds_are_those_a_case_can_name() -> None:
    assert tuple(FILE_KINDS) == DISK_FILE_KINDS


def test_a_disk_whose_process_died_is_made_again(tmp_path: Path) -> None:
    import signal
    import time

    home = tmp_path / "node"
    first = LazyDisk.create(home, owner="test")
    os.kill(int((home / "pid").read_text()), signal.SIGKILL)
    time.sleep(0.3)
    assert not first.alive()
    again = LazyDisk.create(home, owner="test")
    try:
        _write(again.mount / "x", b"ok", sync=True)
        assert (again.mount / "x").read_bytes() == b"ok" and again.alive()
    finally:
        again.destroy()


def test_the_kernel_writes_back_what_was_dirty_long_enough(tmp_path: Path) -> None:
    import time

    disk = LazyDisk.create(tmp_path / "node", owner="test", writeback_s=1.0)
    try:
        _write(disk.mount / "old", b"o" * 100, sync=False)
        time.sleep(1.2)
        _write(disk.mount / "new", b"n" * 100, sync=False)
        assert disk.write_back() == 1  # the flusher's pass, now
        disk.lose()
        assert (disk.mount / "old").read_bytes() == b"o" * 100
        assert (disk.mount / "new").read_bytes() == b""
    finally:
        disk.destroy()


def test_diskfull_on_a_lazy_disk_survives_a_kill_until_heal(disk: LazyDisk) -> None:
    from types import SimpleNamespace
    from typing import cast

    from harness.backend.cluster import Cluster, Node
    from harness.faults import Nemesis

    class Container:
        net_persists = False

        status = "running"

        def kill(self, signal: str) -> None:
            self.status = "exited"

    node = cast(Node, SimpleNamespace(name="kafka-2", container=Container(), disk=disk))
    nemesis = Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: [node])), None)
    nemesis.apply("diskfull", node, role="follower")
    with pytest.raises(OSError) as full:
        _write(disk.mount / "a", b"x", sync=False)
    assert full.value.errno == errno.ENOSPC and os.statvfs(disk.mount).f_bavail == 0
    nemesis.apply("kill9", node)  # a full disk stays full across a restart
    assert nemesis.full == {"kafka-2"}
    nemesis.apply("heal", node)
    _write(disk.mount / "a", b"x", sync=False)
    assert not nemesis.full


def test_snapshot_and_rollback_steps_take_a_node_that_is_down(disk: LazyDisk) -> None:
    from types import SimpleNamespace
    from typing import cast

    from harness.backend.cluster import Cluster, Node
    from harness.errors import FaultError
    from harness.faults import Nemesis

    container = SimpleNamespace(status="running")
    node = cast(Node, SimpleNamespace(name="kafka-3", container=container, disk=disk))
    nemesis = Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: [node])), None)
    _write(disk.mount / "log", b"old", sync=True)
    with pytest.raises(FaultError, match="kafka-3 is running"):
        nemesis.apply("snapshot", node)
    container.status = "exited"
    nemesis.apply("snapshot", node)
    _write(disk.mount / "log", b"newer", sync=True)
    nemesis.apply("rollback", node)
    assert (disk.mount / "log").read_bytes() == b"old"


def test_readonly_refuses_writes_with_erofs_across_a_kill_until_heal(disk: LazyDisk) -> None:
    from types import SimpleNamespace
    from typing import cast

    from harness.backend.cluster import Cluster, Node
    from harness.faults import Nemesis

    class Container:
        net_persists = False

        status = "running"

        def kill(self, signal: str) -> None:
            self.status = "exited"

    node = cast(Node, SimpleNamespace(name="bookie-1", container=Container(), disk=disk))
    nemesis = Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: [node])), None)
    nemesis.apply("readonly", node, role="bookie")
    with pytest.raises(OSError) as refused:
        _write(disk.mount / "journal", b"x", sync=False)
    assert refused.value.errno == errno.EROFS
    nemesis.apply("kill9", node)
    with pytest.raises(OSError):
        _write(disk.mount / "journal", b"x", sync=False)
    nemesis.apply("heal", node)
    _write(disk.mount / "journal", b"x", sync=False)
    assert not nemesis.full


def test_replace_kills_the_node_empties_its_disk_forgets_it_and_starts_a_new_one(disk: LazyDisk) -> None:
    from types import SimpleNamespace
    from typing import cast

    from harness.backend.cluster import Cluster, Node
    from harness.faults import Nemesis

    calls: list[str] = []

    class Container:
        net_persists = False

        status = "running"

        def kill(self, signal: str) -> None:
            calls.append(f"kill {signal}")
            self.status = "exited"

        def start(self) -> None:
            calls.append("start")
            self.status = "running"

    container = Container()
    node = cast(Node, SimpleNamespace(name="bookie-2", container=container, disk=disk))
    nemesis = Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: [node])), None)
    (disk.mount / "bookkeeper" / "ledgers").mkdir(parents=True)
    _write(disk.mount / "bookkeeper" / "ledgers" / "0.log", b"e" * 5000, sync=True)

    def forget(n: Node) -> dict[str, object]:
        calls.append(f"forget {n.name}, disk empty: {not any(disk.mount.iterdir())}")
        return {"cookie_removed": "/ledgers/cookies/bookie-2:3181"}

    detail = nemesis.replace(node, forget)
    assert calls == ["kill KILL", "forget bookie-2, disk empty: True", "start"]
    assert detail == {"bytes_wiped": 5000, "cookie_removed": "/ledgers/cookies/bookie-2:3181"}
    assert not nemesis.down and container.status == "running"
