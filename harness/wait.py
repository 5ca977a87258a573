"""The one waiting primitive: poll a condition until it holds or a deadline passes.

A timeout raises :class:`~harness.errors.WaitTimeout` saying what was awaited,
the last value or error seen, and the last log lines of the nodes involved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_exponential

from .errors import HarnessError, WaitTimeout

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(condition: Callable[[], T], *, timeout: float, what: str,
               logs: Callable[[], Iterable[tuple[str, str]]] | None = None,
               interval: float = 0.25, max_interval: float = 2.0) -> T:
    """Call ``condition`` until it returns a truthy value; return that value.

    Exceptions raised by ``condition`` count as "not yet" (the last one is
    reported). ``logs`` yields (node, last log lines) for the timeout message.
    """
    last: dict[str, Any] = {}

    def attempt() -> Any:
        try:
            value = condition()
        except HarnessError as exc:
            last["error"] = str(exc)
            return None
        except Exception as exc:  # a client error while the cluster converges
            last["error"] = f"{type(exc).__name__}: {exc}"
            return None
        last["value"] = value
        return value

    retrying = Retrying(stop=stop_after_delay(timeout),
                        wait=wait_exponential(multiplier=interval, max=max_interval),
                        retry=retry_if_result(lambda v: not v), reraise=False)
    try:
        return retrying(attempt)
    except RetryError:
        pass
    msg = f"timed out after {timeout:.0f}s waiting for {what}"
    if "error" in last:
        msg += f"; last error: {last['error'][:300]}"
    elif "value" in last:
        msg += f"; last value: {str(last['value'])[:300]}"
    if logs is not None:
        try:
            for node, text in logs():
                lines = "\n    ".join(text.strip().splitlines()[-12:])
                msg += f"\n  last log lines of {node}:\n    {lines}"
        except HarnessError:
            pass  # the logs are a courtesy; the timeout is the error
    raise WaitTimeout(msg)
