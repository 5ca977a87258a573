"""Counting a flapping lock (apache/pulsar#17759) in Docker's time-stamped log lines."""

import datetime as dt

from harness.systems.pulsar import count_recent

NOW = dt.datetime(2026, 11, 22, 8, 17, 0, tzinfo=dt.timezone.utc).timestamp()


def _line(second: int, text: str) -> str:
    return f"2026-11-22T08:16:{second:02d}.838123456Z [2026-11-22 08:16:{second:02d},838] {text}"


def test_only_recent_lines_with_the_needle_count() -> None:
    flap = "INFO Lock on resource /ledgers/available/bookie-2:3181 was invalidated. state Valid"
    text = "\n".join([_line(30, flap), _line(49, flap), _line(55, flap), _line(56, flap),
                      _line(57, "INFO Successfully re-acquired lock"), "no stamp was invalidated",
                      ""])
    assert count_recent(text, "was invalidated", NOW - 10) == 2  # 08:16:49.8 is 10.2 s ago
    assert count_recent(text, "was invalidated", NOW - 60) == 4
    assert count_recent(text, "was invalidated", NOW - 4) == 1
    assert count_recent(text, "was invalidated", NOW + 3600) == 0
    assert count_recent("", "was invalidated", NOW - 10) == 0
