"""docs/regressions.md's results table, made from the last full record of the version matrix.

``harness matrix`` (every regression case on every entry: no paths, no ``--version``) writes
``reports/matrix.json``, the record of its runs with the commit, the date and the command.
This script turns a full record into the Markdown table of docs/regressions.md ("The last
full matrix"), headed by its date and its commit's date, and with ``--write`` puts it
between the page's markers and copies the record to docs/matrix.json (it holds the commit
itself), so that both are committed together. A record that is not full is refused: the
page states the whole library.

Usage: ``python3 bench/regressions_table.py [RECORD] [--write]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without ``pip install -e .``
    sys.path.insert(0, str(ROOT))

from harness.clusters import REPORTS_DIR  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.run.matrix import MATRIX_JSON, read_matrix, record_table  # noqa: E402

DOC = ROOT / "docs" / "regressions.md"
#: Where the committed copy of the record goes, beside the page.
DOC_RECORD = ROOT / "docs" / "matrix.json"
BEGIN = "<!-- matrix-table: begin (bench/regressions_table.py writes this part) -->"
END = "<!-- matrix-table: end -->"


def replace_table(page: str, table: str) -> str:
    """``page`` with what is between its markers replaced by ``table``; a ValueError when
    the markers are not there once each, in order."""
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(BEGIN) > page.index(END):
        raise ValueError(f"expected the markers {BEGIN!r} and {END!r} once each, in order")
    head, rest = page.split(BEGIN)
    return f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("record", nargs="?", default=str(REPORTS_DIR / MATRIX_JSON),
                   help="a matrix.json (default: reports/matrix.json)")
    p.add_argument("--write", action="store_true",
                   help="write the table into docs/regressions.md and the record to "
                        "docs/matrix.json (default: print the table)")
    args = p.parse_args(argv)
    try:
        record = read_matrix(Path(args.record))
        table = record_table(record)
        if args.write:
            DOC.write_text(replace_table(DOC.read_text(encoding="utf-8"), table), encoding="utf-8")
            DOC_RECORD.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
            print(f"wrote {DOC} and {DOC_RECORD}")
        else:
            print(table)
    except (HarnessError, ValueError) as exc:
        print(f"regressions_table: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
