"""One short ZooKeeper session for a read (Kafka ZooKeeper mode, Pulsar metadata)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..clusters import ClusterDef
from ..errors import AdminError
from ..wait import wait_until

T = TypeVar("T")
_LOG = logging.getLogger("harness.zookeeper")
_LOG.addHandler(logging.NullHandler())
_LOG.propagate = False


def zk_address(spec: ClusterDef) -> str:
    """``address:port`` of the cluster's ZooKeeper node (``zk``) as the harness reaches it."""
    node = spec.node("zk") if "zk" in spec.node_names else None
    if node is None or node.host_port is None:
        raise AdminError(f"cluster {spec.name} has no ZooKeeper the harness can reach")
    return node.endpoint


def zk_call(address: str, what: str, fn: Callable[[Any], T]) -> T:
    """Runs ``fn(client)`` on a kazoo client connected to ``address`` (``host:port``).

    A missing node or any client error becomes AdminError naming ``what``.
    """
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    client = KazooClient(hosts=address, timeout=5, connection_retry={"max_tries": 2},
                         logger=_LOG)
    try:
        client.start(timeout=10)
        return fn(client)
    except NoNodeError as exc:
        raise AdminError(f"ZooKeeper has no {what}") from exc
    except Exception as exc:
        raise AdminError(f"reading {what} from ZooKeeper failed: {exc}") from exc
    finally:
        try:
            client.stop()
            client.close()
        except Exception:
            pass  # closing a failed session: nothing left to release


def wait_out_old_session(gone: Callable[[], bool], node: str, where: str,
                         timeout: float) -> dict[str, Any] | None:
    """Waits (up to ``timeout``) until ``gone()``: ZooKeeper has expired the session of a
    killed ``node``, whose ephemeral registration (``where``) it still held. Returns how long
    it waited, or None when the registration was already gone."""
    t0 = time.monotonic()
    if gone():
        return None
    wait_until(gone, timeout=timeout, interval=0.2, max_interval=0.5,
               what=f"ZooKeeper to expire {node}'s old session ({where})")
    return {"waited_for_old_session_s": round(time.monotonic() - t0, 1)}
