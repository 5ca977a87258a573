"""A lazy disk: a FUSE filesystem that forgets what its processes did not fsync.

A node of a cluster made with ``disk: lazy`` keeps its data directory (``/data``) on one of
these, mounted on the host and bound into the container. Every write reaches the backing
directory at once (reads need no merging), and the filesystem keeps, per file, what it
needs to undo the writes since the file's last ``fsync``: the size at that fsync and the
original content of each 4 KiB page overwritten since. A power loss (:meth:`LazyDisk.lose`)
puts every file back to its state at its last fsync: a file written and never synced comes
back empty, an appended tail is cut, an overwritten page gets its old bytes. As the kernel
does, a file dirty for :data:`WRITEBACK_S` (Linux's ``vm.dirty_expire_centisecs``, 30 s) is
written back all the same (a flusher looks every 5 s): what a power loss takes is what was
written in the last half minute and not fsynced. With ``torn``
the node's last unsynced write survives in part (its first half), as a write that tore when
the power went. What survives, like a real disk's metadata journal: file creation,
deletion and renames (LazyFS does the same: it delays data, not the namespace).

The kernel keeps pages of a memory-mapped file dirty in its own cache and writes them to
the filesystem later; :meth:`LazyDisk.lose` first has them written (``syncfs`` on the
mount), so they are lost with the rest rather than written after the loss.

Faults on the disk besides power loss: :meth:`LazyDisk.corrupt` flips a bit or truncates a
file of the backing directory (aimed by a file kind, :data:`FILE_KINDS`), and
:meth:`LazyDisk.set_mode` makes writes fail with ENOSPC (``full``) or EROFS (``readonly``).
:meth:`LazyDisk.snapshot` and :meth:`LazyDisk.rollback` copy the backing directory and put
it back (a node down).

Each disk is one process (``python3 -m harness.backend.lazyfs serve DIR``) on the host,
outside the harness process, so that a kept cluster keeps its disks; it answers JSON lines
on a Unix socket in ``DIR``. ``DIR`` holds ``data/`` (the backing directory), ``mnt/``
(the mount point), ``ctl.sock``, ``pid`` and ``owner`` (the harness process that made it:
:func:`sweep` removes disks whose owner is gone).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BackendError

__all__ = ["LazyDisk", "FILE_KINDS", "DISKS_DIR", "sweep", "available"]

PAGE = 4096
#: where the disks of every cluster live (a directory per cluster and node)
DISKS_DIR = Path(os.environ.get("CHAOS_DISKS_DIR", "/var/lib/chaos-harness/disks"))
#: file kinds a corruption aims at: a regular expression on the path inside ``/data``
FILE_KINDS = {
    "log": r"/kafka/(?!__cluster_metadata-)[^/]+/\d{20}\.log$",
    "index": r"\.(index|timeindex)$",
    "checkpoint": r"/[a-z-]*checkpoint$|/meta\.properties$|/quorum-state$",
    "journal": r"/bookkeeper/journal/.+\.txn$",
    "entrylog": r"/bookkeeper/ledgers/.+\.log$",
    "metadata": (r"/zookeeper/.+/(log|snapshot)\.[0-9a-f]+$|/ledgers/.+/(ledgers|locations)/"
                 r"|/__cluster_metadata-0/[\d-]+\.(log|checkpoint)$"),
}
_SERVE_WAIT_S = 15.0
#: the kernel's write-back of dirty data: Linux's vm.dirty_expire_centisecs (30 s by default)
WRITEBACK_S = 30.0


def available() -> str | None:
    """None when a lazy disk can be mounted here, else what is missing."""
    if not Path("/dev/fuse").exists():
        return "/dev/fuse is missing (the kernel's FUSE module)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (Debian package fuse3: run bin/setup)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy cannot load libfuse3 ({exc}; Debian package libfuse3-3: run bin/setup)"
    return None


# -- the filesystem (runs in the disk's own process) ------------------------------------------
@dataclass
class _Undo:
    """What one file needs to go back to its last fsync (or write-back)."""

    synced_size: int
    pages: dict[int, bytes] = field(default_factory=dict)  # page index -> original bytes
    since: float = field(default_factory=time.monotonic)  # when the file became dirty


class _Tracker:
    """The undo state of every file changed since its last fsync (paths relative to the
    backing directory), and the node's last unsynced write."""

    def __init__(self, root: str, writeback_s: float = 0.0) -> None:
        self.root = root
        self.lock = threading.Lock()
        self.files: dict[str, _Undo] = {}
        self.last: tuple[str, int, bytes] | None = None
        self.mode = "normal"  # or "full", "readonly"
        self.writeback_s = writeback_s  # 0: nothing is written back without an fsync
        self.written_back = 0  # files written back so far

    def write_back(self, now: float | None = None) -> int:
        """The kernel's periodic write-back: every file dirty for ``writeback_s`` or longer
        is on the disk now, as if fsynced (Linux writes back an inode whose first dirty page
        is older than ``vm.dirty_expire_centisecs``, 30 s by default). Returns how many."""
        if self.writeback_s <= 0:
            return 0
        now = time.monotonic() if now is None else now
        with self.lock:
            old = [rel for rel, u in self.files.items() if now - u.since >= self.writeback_s]
            for rel in old:
                del self.files[rel]
                if self.last is not None and self.last[0] == rel:
                    self.last = None
            self.written_back += len(old)
            return len(old)

    def _undo(self, rel: str) -> _Undo:
        u = self.files.get(rel)
        if u is None:
            try:
                size = os.stat(self.root + rel).st_size
            except FileNotFoundError:
                size = 0
            u = self.files[rel] = _Undo(size)
        return u

    def created(self, rel: str) -> None:
        with self.lock:
            self.files[rel] = _Undo(0)

    def before_write(self, rel: str, fd: int, offset: int, length: int) -> None:
        """Saves the original pages ``[offset, offset + length)`` covers below the synced size."""
        with self.lock:
            u = self._undo(rel)
            end = min(offset + length, u.synced_size)
            for page in range(offset // PAGE, (end + PAGE - 1) // PAGE if end > offset else 0):
                if page not in u.pages:
                    u.pages[page] = os.pread(fd, PAGE, page * PAGE)[: max(0, u.synced_size - page * PAGE)]

    def wrote(self, rel: str, offset: int, data: bytes) -> None:
        with self.lock:
            self.last = (rel, offset, data)

    def before_truncate(self, rel: str, fd: int, length: int) -> None:
        with self.lock:
            u = self._undo(rel)
        if length < u.synced_size:
            self.before_write(rel, fd, length, u.synced_size - length)

    def synced(self, rel: str) -> None:
        with self.lock:
            self.files.pop(rel, None)
            if self.last is not None and self.last[0] == rel:
                self.last = None

    def renamed(self, old: str, new: str) -> None:
        with self.lock:
            self.files.pop(new, None)
            if old in self.files:
                self.files[new] = self.files.pop(old)
            if self.last is not None and self.last[0] == old:
                self.last = (new, *self.last[1:])

    def unlinked(self, rel: str) -> None:
        with self.lock:
            self.files.pop(rel, None)
            if self.last is not None and self.last[0] == rel:
                self.last = None

    def unsynced(self) -> list[dict[str, Any]]:
        """Per file changed since its fsync: its size now, its synced size, pages rewritten."""
        with self.lock:
            rows = []
            for rel, u in sorted(self.files.items()):
                try:
                    size = os.stat(self.root + rel).st_size
                except FileNotFoundError:
                    continue
                if size != u.synced_size or u.pages:
                    rows.append({"file": rel, "size": size, "synced_size": u.synced_size,
                                 "pages_rewritten": len(u.pages)})
            return rows

    def lose(self, torn: bool) -> dict[str, Any]:
        """Puts every file back to its last fsync (see the module); says what each lost.
        ``torn``: the file of the last unsynced write keeps what was written before that
        write, and the first half of it."""
        rows = self.unsynced()
        with self.lock:
            last, keep = self.last, None
            if torn and last is not None and os.path.exists(self.root + last[0]):
                rel, offset, data = last
                u = self.files.get(rel)
                start = min([u.synced_size, *(p * PAGE for p in u.pages)]) if u else offset
                cut = offset + max(1, len(data) // 2)
                with open(self.root + rel, "rb") as f:
                    f.seek(start)
                    keep = (rel, start, f.read(max(0, cut - start)), offset, len(data), cut)
            for rel, u in self.files.items():
                path = self.root + rel
                if not os.path.exists(path):
                    continue
                with open(path, "r+b") as f:
                    f.truncate(u.synced_size)
                    for page, data in u.pages.items():
                        f.seek(page * PAGE)
                        f.write(data)
            tore = None
            if keep is not None:
                rel, start, region, offset, length, cut = keep
                with open(self.root + rel, "r+b") as f:
                    f.seek(start)
                    f.write(region)
                tore = {"file": rel, "offset": offset, "length": length, "kept": cut - offset}
            self.files.clear()
            self.last = None
        lost = sum(max(0, r["size"] - r["synced_size"]) + PAGE * r["pages_rewritten"] for r in rows)
        return {"files": rows, "bytes_lost": lost, "torn": tore, "writeback_s": self.writeback_s}


def _operations(root: str, tracker: _Tracker) -> Any:
    """The passthrough operations over ``root``, with ``tracker`` told of every change."""
    from mfusepy import FuseOSError, Operations

    def full(path: str) -> str:
        return root + path

    def refuse() -> None:
        if tracker.mode == "full":
            raise FuseOSError(errno.ENOSPC)
        if tracker.mode == "readonly":
            raise FuseOSError(errno.EROFS)

    def oserr(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kw: Any) -> Any:
            try:
                return fn(*args, **kw)
            except OSError as exc:
                raise FuseOSError(exc.errno or errno.EIO) from None
        return wrapped

    class Lazy(Operations):
        use_ns = True

        @oserr
        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.lstat(full(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino", "st_dev",
                    "st_blocks", "st_blksize")
            out = {k: getattr(st, k) for k in keys}
            out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return out

        @oserr
        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(full(path))]

        @oserr
        def access(self, path: str, amode: int) -> int:
            if not os.access(full(path), amode):
                raise FuseOSError(errno.EACCES)
            return 0

        @oserr
        def open(self, path: str, flags: int) -> int:
            writes = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC))
            if writes:
                refuse()
            # read-write underneath (the page saves read what a write replaces); no O_APPEND:
            # the kernel gives each write its offset, and pwrite on an O_APPEND file ignores it
            strip = os.O_TRUNC | os.O_APPEND | os.O_WRONLY | os.O_CREAT | os.O_EXCL
            fd = os.open(full(path), (flags & ~strip) | (os.O_RDWR if writes else 0))
            if flags & os.O_TRUNC:
                tracker.before_truncate(path, fd, 0)
                os.ftruncate(fd, 0)
            return fd

        @oserr
        def create(self, path: str, mode: int, fi: Any = None) -> int:
            refuse()
            fd = os.open(full(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
            tracker.created(path)
            return fd

        @oserr
        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        @oserr
        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            refuse()
            tracker.before_write(path, fh, offset, len(data))
            n = os.pwrite(fh, data, offset)
            tracker.wrote(path, offset, bytes(data[:n]))
            return n

        @oserr
        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            refuse()
            fd = fh if fh is not None else os.open(full(path), os.O_RDWR)
            try:
                tracker.before_truncate(path, fd, length)
                os.ftruncate(fd, length)
            finally:
                if fh is None:
                    os.close(fd)
            return 0

        @oserr
        def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
            if mode != 0:
                raise FuseOSError(errno.EOPNOTSUPP)
            refuse()
            tracker.before_write(path, fh, offset, 0)
            os.posix_fallocate(fh, offset, size)
            return 0

        @oserr
        def fsync(self, path: str, datasync: int, fh: int) -> int:
            os.fsync(fh) if not datasync else os.fdatasync(fh)
            tracker.synced(path)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0  # close() does not sync

        @oserr
        def release(self, path: str, fh: int) -> int:
            os.close(fh)
            return 0

        @oserr
        def unlink(self, path: str) -> int:
            os.unlink(full(path))
            tracker.unlinked(path)
            return 0

        @oserr
        def rename(self, old: str, new: str) -> int:
            os.rename(full(old), full(new))
            tracker.renamed(old, new)
            return 0

        @oserr
        def mkdir(self, path: str, mode: int) -> int:
            refuse()
            os.mkdir(full(path), mode)
            return 0

        @oserr
        def rmdir(self, path: str) -> int:
            os.rmdir(full(path))
            return 0

        @oserr
        def chmod(self, path: str, mode: int) -> int:
            os.chmod(full(path), mode)
            return 0

        @oserr
        def chown(self, path: str, uid: int, gid: int) -> int:
            os.chown(full(path), uid, gid)
            return 0

        @oserr
        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            os.utime(full(path), ns=times) if times else os.utime(full(path))
            return 0

        @oserr
        def symlink(self, target: str, source: str) -> int:
            os.symlink(source, full(target))
            return 0

        @oserr
        def readlink(self, path: str) -> str:
            return os.readlink(full(path))

        @oserr
        def link(self, target: str, source: str) -> int:
            os.link(full(source), full(target))
            return 0

        @oserr
        def statfs(self, path: str) -> dict[str, Any]:
            st = os.statvfs(full(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                    "f_files", "f_flag", "f_frsize", "f_namemax")
            out = {k: getattr(st, k) for k in keys}
            if tracker.mode == "full":
                out.update(f_bavail=0, f_bfree=0)
            return out

    return Lazy()


def _control(tracker: _Tracker, sock_path: str) -> socketserver.UnixStreamServer:
    """The disk's control socket: one JSON request a line, one JSON answer a line."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                try:
                    req = json.loads(line)
                    op = req.get("op")
                    if op == "ping":
                        out: Any = {"ok": True, "pid": os.getpid()}
                    elif op == "unsynced":
                        out = {"ok": True, "files": tracker.unsynced()}
                    elif op == "lose":
                        out = {"ok": True, **tracker.lose(bool(req.get("torn")))}
                    elif op == "forget":
                        with tracker.lock:
                            tracker.files.clear()
                            tracker.last = None
                        out = {"ok": True}
                    elif op == "write_back":
                        out = {"ok": True, "files": tracker.write_back()}
                    elif op == "mode":
                        if req.get("mode") not in ("normal", "full", "readonly"):
                            raise ValueError(f"unknown mode {req.get('mode')!r}")
                        tracker.mode = req["mode"]
                        out = {"ok": True, "mode": tracker.mode}
                    else:
                        raise ValueError(f"unknown op {op!r}")
                except Exception as exc:  # the answer carries it; the disk stays up
                    out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                self.wfile.write(json.dumps(out).encode() + b"\n")
                self.wfile.flush()

    if os.path.exists(sock_path):
        os.unlink(sock_path)
    server = socketserver.ThreadingUnixStreamServer(sock_path, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="lazyfs-control").start()
    return server


def serve(home: Path, writeback_s: float = 0.0) -> None:
    """Mounts the disk of ``home`` and serves it until unmounted (the disk's process);
    ``writeback_s`` > 0: a flusher writes back, every 5 s, files dirty that long."""
    from mfusepy import FUSE

    root = str(home / "data")
    tracker = _Tracker(root, writeback_s)
    _control(tracker, str(home / "ctl.sock"))
    if writeback_s > 0:
        def flusher() -> None:
            while True:
                time.sleep(min(5.0, writeback_s))
                tracker.write_back()
        threading.Thread(target=flusher, daemon=True, name="lazyfs-writeback").start()
    FUSE(_operations(root, tracker), str(home / "mnt"), foreground=True, allow_other=True,
         default_permissions=False, attr_timeout=0.5, entry_timeout=0.5, fsname="chaos-lazy")


# -- the harness's handle ---------------------------------------------------------------------
class LazyDisk:
    """A lazy disk in ``home`` (see the module): made with :meth:`create`, found again by
    its directory, removed with :meth:`destroy`."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)

    @property
    def mount(self) -> Path:
        return self.home / "mnt"

    @property
    def data(self) -> Path:
        return self.home / "data"

    def __repr__(self) -> str:
        return f"LazyDisk({str(self.home)!r})"

    @classmethod
    def create(cls, home: Path, owner: str, writeback_s: float = WRITEBACK_S) -> LazyDisk:
        """Makes the directories, starts the disk's process and waits until it is mounted.
        ``writeback_s``: files dirty that long are written back as the kernel would (0:
        never, only an fsync makes data durable)."""
        why = available()
        if why:
            raise BackendError(f"a lazy disk cannot be mounted here: {why}")
        disk = cls(home)
        if disk.alive():
            return disk
        disk.destroy()
        for d in (disk.data, disk.mount):
            d.mkdir(parents=True, exist_ok=True)
        (disk.home / "owner").write_text(owner)
        log_file = open(disk.home / "serve.log", "ab")  # noqa: SIM115 - the child keeps it
        proc = subprocess.Popen([sys.executable, "-m", "harness.backend.lazyfs", "serve", str(home),
                                 "--writeback", f"{writeback_s:g}"],
                                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        log_file.close()
        (disk.home / "pid").write_text(str(proc.pid))
        deadline = time.monotonic() + _SERVE_WAIT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            if disk.alive():
                return disk
            time.sleep(0.1)
        tail = (disk.home / "serve.log").read_text(errors="replace")[-600:]
        disk.destroy()
        raise BackendError(f"the lazy disk in {home} did not mount in {_SERVE_WAIT_S:g}s: {tail}")

    def _ask(self, req: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(str(self.home / "ctl.sock"))
                s.sendall(json.dumps(req).encode() + b"\n")
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
        except OSError as exc:
            raise BackendError(f"the lazy disk in {self.home} does not answer ({exc})") from None
        out: dict[str, Any] = json.loads(buf or b"{}")
        if not out.get("ok"):
            raise BackendError(f"the lazy disk in {self.home}: {out.get('error', 'no answer')}")
        return out

    def alive(self) -> bool:
        """Whether the disk's process answers and its mount is in place."""
        if not os.path.ismount(self.mount):
            return False
        try:
            self._ask({"op": "ping"}, timeout=5)
        except BackendError:
            return False
        return True

    def unsynced(self) -> list[dict[str, Any]]:
        return list(self._ask({"op": "unsynced"})["files"])

    def write_back(self) -> int:
        """Writes back now what has been dirty for the disk's write-back time (tests)."""
        return int(self._ask({"op": "write_back"})["files"])

    def lose(self, torn: bool = False) -> dict[str, Any]:
        """A power loss of the disk (its processes must be dead): the kernel's dirty pages
        are written first (syncfs), then every file goes back to its last fsync. Returns
        ``files`` (what each lost), ``bytes_lost`` and ``torn``."""
        _syncfs(self.mount)
        out = self._ask({"op": "lose", "torn": torn})
        out.pop("ok", None)
        return out

    def set_mode(self, mode: str) -> None:
        """``normal``, ``full`` (writes fail with ENOSPC) or ``readonly`` (EROFS)."""
        self._ask({"op": "mode", "mode": mode})

    def files(self, kind: str, prefer: str | None = None) -> list[str]:
        """Files of the backing directory of ``kind`` (:data:`FILE_KINDS`), as paths inside
        ``/data``: those whose path has ``prefer`` first (a case's topic), each group largest
        first."""
        if kind not in FILE_KINDS:
            raise BackendError(f"unknown file kind {kind!r} (kinds: {', '.join(FILE_KINDS)})")
        pat = re.compile(FILE_KINDS[kind])
        found = []
        for dirpath, _, names in os.walk(self.data):
            for n in names:
                rel = "/" + os.path.relpath(os.path.join(dirpath, n), self.data)
                if pat.search(rel):
                    found.append((os.path.getsize(os.path.join(dirpath, n)), rel))
        found.sort(key=lambda f: (prefer is None or prefer not in f[1], -f[0], f[1]))
        return [rel for _, rel in found]

    def corrupt(self, rel: str, how: str, offset: int | None = None) -> dict[str, Any]:
        """``bitflip`` (one bit at ``offset``, default the middle of the file) or
        ``truncate`` (to ``offset``, default half the file) on the file ``rel`` of the
        backing directory. A running process may still read its cached pages until it
        opens the file again. Says what it changed."""
        path = str(self.data) + rel
        try:
            size = os.path.getsize(path)
        except OSError as exc:
            raise BackendError(f"no file {rel} on the lazy disk in {self.home} ({exc})") from None
        if how == "bitflip":
            if size == 0:
                raise BackendError(f"{rel} is empty: no bit to flip")
            at = size // 2 if offset is None else offset
            if not 0 <= at < size:
                raise BackendError(f"offset {at} is outside {rel} ({size} bytes)")
            with open(path, "r+b") as f:
                f.seek(at)
                old = f.read(1)[0]
                f.seek(at)
                f.write(bytes([old ^ 0x01]))
            return {"file": rel, "how": how, "offset": at, "old": old, "new": old ^ 0x01, "size": size}
        if how == "truncate":
            to = size // 2 if offset is None else offset
            if not 0 <= to <= size:
                raise BackendError(f"length {to} is outside {rel} ({size} bytes)")
            os.truncate(path, to)
            return {"file": rel, "how": how, "size": size, "cut_to": to}
        raise BackendError(f"unknown corruption {how!r} (bitflip, truncate)")

    def snapshot(self, name: str) -> int:
        """Copies the backing directory aside (a node down: files at rest); returns bytes."""
        dest = self.home / "snapshots" / name
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(self.data, dest, symlinks=True)
        return sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())

    def rollback(self, name: str) -> int:
        """Puts the snapshot ``name`` back in place of the backing directory (a node down)."""
        src = self.home / "snapshots" / name
        if not src.is_dir():
            raise BackendError(f"no snapshot {name!r} of the lazy disk in {self.home}")
        for child in self.data.iterdir():
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        for child in src.iterdir():
            dest = self.data / child.name
            shutil.copytree(child, dest, symlinks=True) if child.is_dir() else shutil.copy2(child, dest)
        self._ask({"op": "forget"})  # what was pending belonged to the files replaced
        return sum(p.stat().st_size for p in self.data.rglob("*") if p.is_file())

    def wipe(self) -> int:
        """Empties the backing directory (a node down), as a new disk in its place; returns the
        bytes removed."""
        gone = sum(p.stat().st_size for p in self.data.rglob("*") if p.is_file() and not p.is_symlink())
        for child in self.data.iterdir():
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        self._ask({"op": "forget"})  # what was pending belonged to the files removed
        return gone

    def destroy(self) -> None:
        """Unmounts the disk, stops its process and removes its directory (idempotent)."""
        if self.home.exists():  # a dead disk's mount is not "a mount" to ismount, and blocks rmtree
            subprocess.run(["fusermount3", "-u", "-z", str(self.mount)], capture_output=True)
        pid_file = self.home / "pid"
        if pid_file.exists():
            try:
                pid = int(pid_file.read_text())
                os.kill(pid, 15)
                for _ in range(50):
                    os.kill(pid, 0)
                    time.sleep(0.05)
                os.kill(pid, 9)
            except (ValueError, ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(self.home, ignore_errors=True)


def _syncfs(path: Path) -> None:
    """syncfs(2) on the filesystem of ``path`` (Python's os has no syncfs)."""
    import ctypes

    fd = os.open(path, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def sweep(alive: Callable[[str], bool]) -> list[str]:
    """Destroys the disks under :data:`DISKS_DIR` whose owner (``alive(owner)`` False) is
    gone; returns their directories."""
    gone: list[str] = []
    if not DISKS_DIR.is_dir():
        return gone
    for owner_file in DISKS_DIR.glob("*/*/owner"):
        if not alive(owner_file.read_text().strip()):
            LazyDisk(owner_file.parent).destroy()
            gone.append(str(owner_file.parent))
    return gone


def main(argv: list[str]) -> int:
    if len(argv) in (2, 4) and argv[0] == "serve" and (len(argv) == 2 or argv[2] == "--writeback"):
        serve(Path(argv[1]), float(argv[3]) if len(argv) == 4 else 0.0)
        return 0
    print("usage: python3 -m harness.backend.lazyfs serve DIR [--writeback SECONDS]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
