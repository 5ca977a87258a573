"""Loading and unloading Byteman rules on a node whose JVM runs the Byteman agent (the
images start it with a listener on 127.0.0.1:9091 inside the container)."""

from __future__ import annotations

from typing import Any

from ..errors import BackendError

__all__ = ["SUBMIT", "ListenerDown", "submit_rules", "unload_rules"]

#: Byteman's submit client, run inside the node's container
SUBMIT = ["java", "-Xmx64m", "-cp", "/opt/byteman/byteman-submit.jar",
          "org.jboss.byteman.agent.submit.Submit", "-p", "9091"]


class ListenerDown(BackendError):
    """The node's JVM does not listen for rules yet (it is starting) or any more."""


#: what Submit prints when it cannot connect to the listener
_NO_LISTENER = ("Submit$Comm.<init>", "java.net.ConnectException", "Connection refused")


def submit_rules(node: Any, rules: str, key: str) -> None:
    """Writes ``rules`` to ``/chaos/<key>.btm`` in ``node``'s container and loads them; a
    BackendError when the node cannot be reached or Byteman rejects a rule
    (:class:`ListenerDown` when nothing listens for them)."""
    path = f"/chaos/{key}.btm"
    node.container.put_file(path, rules.encode())
    code, out = node.container.exec([*SUBMIT, "-l", path])
    if any(mark in out for mark in _NO_LISTENER):
        raise ListenerDown(f"no Byteman listener on {node.name} (is its JVM starting?): "
                           f"{out.strip()[-300:]}")
    if code != 0 or "ERROR" in out or "Exception" in out:
        raise BackendError(f"Byteman rejected the rules on {node.name}: {out.strip()[-600:]}")


def unload_rules(node: Any, *keys: str) -> None:
    """Unloads the rules loaded from ``/chaos/<key>.btm`` for each key (one Submit)."""
    node.container.exec([*SUBMIT, "-u", *(f"/chaos/{k}.btm" for k in keys)])
