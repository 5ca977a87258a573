"""``harness nodes prepare``: everything a host needs to play its node, sent by the harness.

A host gets, from the same local image a Docker node of that system and version runs:

- the Java runtime, at ``/opt/chaos-harness/java`` (the harness never uses the host's);
- the system's jars, configuration and entrypoint at the image's own paths (``/opt/kafka``
  or ``/opt/pulsar``), and the Byteman agent at ``/opt/byteman``, so the entrypoint, the
  injection rules and the evidence readers find them where they do in a container;
- ``/opt/chaos-harness/bin/node``, the supervisor: it starts the entrypoint apart from the
  SSH session with the node's environment, records its process, stamps each line of its
  output with the time, and never restarts it: a process killed with -9 stays down until
  the harness starts it again (``node start``), as a stopped container does.

The bundle (a gzipped tar, symbolic links resolved) is made once per image and kept in the
image cache; each host receives it over SFTP and unpacks it; ``prepare`` is idempotent
(a host with this bundle already is left as it is).
"""

from __future__ import annotations

import hashlib
import logging
import shlex
import time
from pathlib import Path

from ..clusters import NodesFile
from ..errors import BackendError
from .docker import LABEL_MANAGED, Engine
from .images import CACHE_DIR, ensure_images
from .ssh import HOME, SshHost, check_host, hosts

__all__ = ["bundle_for", "prepare", "SUPERVISOR"]

log = logging.getLogger(__name__)

#: the image's Java runtime, moved to HOME/java on the host
_IMAGE_JAVA = "usr/lib/jvm/java-17-openjdk-amd64"
#: the image's paths the bundle carries, per system
_PATHS = {"kafka": ("opt/kafka", "opt/byteman"), "pulsar": ("opt/pulsar", "opt/byteman")}

#: The supervisor (``HOME/bin/node``). ``start`` runs the entrypoint in its own session
#: with the environment in ``HOME/node.env``; the pid file names the process group.
SUPERVISOR = r"""#!/bin/sh
# chaos-harness node supervisor: start | kill | stop | pause | resume | signal | status | pid
# The node's process is never restarted here: killed, it stays down until `node start`.
set -u
HOME_DIR=/opt/chaos-harness
# signals go to the whole process group through procps's kill (dash's builtin takes no
# negative pid)
group() { env kill "-$1" -- "-$(pid)"; }
PIDS="$HOME_DIR/node.pid"
LOG="$HOME_DIR/node.log"
pid() { [ -s "$PIDS" ] && cat "$PIDS"; }
alive() { p=$(pid) && kill -0 "$p" 2>/dev/null && ! ps -o stat= -p "$p" | grep -q '^Z'; }
case "${1:-}" in
  start)
    if alive; then echo "already running: $(pid)"; exit 0; fi
    set -a; . "$HOME_DIR/node.env"; set +a
    # shim: commands the node sees instead of the host's (hostname: the node's name)
    export PATH="$HOME_DIR/shim:$HOME_DIR/java/bin:$PATH"
    # each line of output stamped with the host's time (Unix seconds, microseconds), as
    # Docker stamps a container's; the stamper ignores every signal but KILL and ends at EOF.
    # setsid -f, not "&": an asynchronous command would start with SIGINT and SIGQUIT ignored
    # (and the JVM's thread dump on SIGQUIT with them); nothing keeps the SSH session's output
    # CHAOS_PRELOAD (a node's own clock: libfaketime) is preloaded in the entrypoint alone: the
    # stamper, a subshell forked before, keeps the real time
    setsid -f bash -c 'echo $$ > "$0"; [ -n "${CHAOS_PRELOAD:-}" ] && export LD_PRELOAD="$CHAOS_PRELOAD"
      exec "$1" > >(trap "" HUP INT QUIT TERM USR1 USR2; unset LD_PRELOAD
      while IFS= read -r l; do printf "%s %s\n" "$EPOCHREALTIME" "$l"; done >> "$2") 2>&1' \
      "$PIDS" "$ENTRYPOINT" "$LOG" < /dev/null > /dev/null 2>&1
    for _ in 1 2 3 4 5 6 7 8 9 10; do alive && exit 0; sleep 0.1; done
    echo "the node did not start: $(tail -5 "$LOG")" >&2; exit 1 ;;
  kill) alive && group KILL; exit 0 ;;
  stop)
    alive || exit 0
    group TERM
    for _ in $(seq 1 "${2:-30}0"); do alive || exit 0; sleep 0.1; done
    group KILL; exit 0 ;;
  pause) alive && group STOP; exit 0 ;;
  resume) alive && group CONT; exit 0 ;;
  signal) alive && group "$2"; exit 0 ;;
  status)
    if ! alive; then echo exited
    else case $(ps -o stat= -p "$(pid)") in T*) echo paused ;; *) echo running ;; esac; fi ;;
  pid) alive && pid ;;
  *) echo "usage: node start|kill|stop [seconds]|pause|resume|signal NAME|status|pid" >&2; exit 2 ;;
esac
"""


def bundle_for(engine: Engine, system: str, version: str) -> Path:
    """The bundle of ``system`` ``version``'s image (built if missing), made once and cached."""
    tag = ensure_images(engine, system, version)
    image_id = engine.client.images.get(tag).id.split(":")[-1][:16]
    folder = CACHE_DIR / "bundles"
    path = folder / f"{system}-{version}-{image_id}.tar.gz"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    script = (f"tar -C / -chzf /out/{partial.name} "
              f"--transform 's,^{_IMAGE_JAVA},opt/chaos-harness/java,' {_IMAGE_JAVA} "
              + " ".join(_PATHS[system]))
    t0 = time.monotonic()
    try:
        engine.client.containers.run(tag, ["sh", "-c", script], entrypoint=[], remove=True,
                                     volumes={str(folder): {"bind": "/out", "mode": "rw"}},
                                     labels={LABEL_MANAGED: "true"}, network_mode="none")
    except Exception as exc:
        partial.unlink(missing_ok=True)
        raise BackendError(f"packing the node bundle of {tag} failed: {exc}") from exc
    partial.rename(path)
    mib = path.stat().st_size / 2**20
    log.info(f"node bundle {path.name}: {mib:.0f} MiB in {time.monotonic() - t0:.0f} s")
    return path


def prepare(engine: Engine, nodes: NodesFile) -> list[str]:
    """Sends every host of ``nodes`` its bundle and the supervisor (:mod:`this module`);
    one line per host. A host that cannot be reached, or lacks a tool, is one CaseError
    before anything is sent to any host."""
    bundle = bundle_for(engine, nodes.cluster.system, nodes.version)
    # a host is up to date when it has this bundle (named by its image) and this supervisor
    digest = hashlib.sha256((bundle.name + SUPERVISOR).encode()).hexdigest()[:16]
    lines = []
    with hosts(nodes, runtime=False) as connected:
        for name, host in connected.items():
            t0 = time.monotonic()
            sent = _prepare_host(nodes, host, bundle, digest)
            check_host(nodes, host)  # the prepared Java answers
            took = time.monotonic() - t0
            mib = bundle.stat().st_size / 2**20
            what = f"prepared ({mib:.0f} MiB sent, {took:.1f} s)" if sent else "already prepared"
            lines.append(f"{name}: {host.node.where} {what}")
    return lines


def _prepare_host(nodes: NodesFile, host: SshHost, bundle: Path, digest: str) -> bool:
    node = host.node
    stamp = f"{HOME}/bundle.{digest}"
    status, _ = host.run(f"test -f {stamp}", timeout=30)
    if status == 0:
        return False
    remote = f"{HOME}/incoming.tar.gz"
    status, out = host.run(f"mkdir -p {HOME}/bin /data /chaos", timeout=30)
    if status != 0:
        raise nodes.error(node, f"{node.where}: cannot create {HOME} ({out.strip()[-200:]}): "
                                f"the user needs to write /opt, /data and /chaos (root)")
    try:
        with host.client.open_sftp() as sftp:
            sftp.put(str(bundle), remote)
            with sftp.open(f"{HOME}/bin/node", "w") as fh:
                fh.write(SUPERVISOR)
            sftp.chmod(f"{HOME}/bin/node", 0o755)
    except OSError as exc:
        raise nodes.error(node, f"{node.where}: sending the bundle failed: {exc}") from None
    # what an earlier bundle unpacked goes first: another version's jars must not stay beside these
    unpack = (f"rm -rf {HOME}/java {' '.join('/' + p for paths in _PATHS.values() for p in paths)} && "
              f"tar -C / -xzf {remote} && rm -f {remote} {HOME}/bundle.* && "
              f"{HOME}/java/bin/java -version && touch {stamp}")
    status, out = host.run(unpack, timeout=600)
    if status != 0:
        raise nodes.error(node, f"{node.where}: unpacking the bundle failed (exit {status}): "
                                f"{shlex.quote(out.strip()[-300:])}")
    return True
