"""``python -m harness.check.train [--background]``: make the shared server's AOT cache
(:mod:`harness.check.engine.aot`) by checking a small synthetic run with this package's
check (:mod:`harness.check.plan`). The shared server's supervisor runs it after an idle
stop (with ``--background``: quiet, and ended by the next server's start)."""

from __future__ import annotations

import argparse
import signal
import sys

from harness.check import plan
from harness.check.engine import aot, training
from harness.errors import CheckError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.check.train",
                                     description="make the AOT cache of the checker server's Java")
    parser.add_argument(aot.BACKGROUND, dest="background", action="store_true",
                        help="quiet, and ended by the next server's start (the idle stop's training)")
    args = parser.parse_args(argv)
    # SIGTERM (a check wants the machine: aot.stop_training) ends it through its cleanup
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(3))
    try:
        path = training.train(plan.run, plan.close, log=(lambda _m: None) if args.background else print,
                              background=args.background)
    except CheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
