"""How fast this machine is right now, from two fixed pieces of work.

The checker's figures moved by 20 to 55% between sessions (and within one) on machines of
the same kind, with the code unchanged. A bench that prints this probe beside its figures
lets a reader compare figures taken at different times: divide by the probe's ratio.

- ``python``: a pure-Python loop over 200,000 small records through ``json.dumps`` and
  ``json.loads`` (what generating a history and the plain-Python reference do);
- ``arrow_json``: PyArrow's JSON reader on a fixed 16 MiB block of history-like lines
  (the largest single part of a big check).

Each is the median of 3 runs, in seconds (lower is faster).
"""

from __future__ import annotations

import io
import json
import os
import statistics
import time

__all__ = ["probe", "describe"]


def _python() -> None:
    for i in range(200_000):
        json.loads(json.dumps({"type": "ok", "mid": f"p-{i}", "partition": i % 6,
                               "offset": i, "t": 1.5 + i}))


def _block() -> bytes:
    lines = []
    size = 0
    i = 0
    while size < 16 << 20:
        line = json.dumps({"type": "oks", "client": "p-1", "topic": "t", "t": 1.5 + i,
                           "mids": [f"p-1-{i * 8 + k}" for k in range(8)],
                           "partitions": [k % 6 for k in range(8)],
                           "offsets": list(range(i * 8, i * 8 + 8))}) + "\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()


def probe(runs: int = 3) -> dict[str, float]:
    """Seconds (median of ``runs``) of each fixed piece of work."""
    import pyarrow.json as pj

    block = _block()
    opts = pj.ReadOptions(use_threads=False, block_size=len(block) + 1)
    times: dict[str, list[float]] = {"python": [], "arrow_json": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        _python()
        times["python"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pj.read_json(io.BytesIO(block), read_options=opts)
        times["arrow_json"].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def describe(runs: int = 3) -> str:
    """One line for a bench's output: the probe's figures and the load."""
    figures = probe(runs)
    return (f"machine speed (fixed work, lower is faster): python {figures['python']:.2f}s, "
            f"arrow json {figures['arrow_json']:.3f}s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    print(describe())
