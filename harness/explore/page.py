"""A campaign's page (``reports/explore-*/index.html``): what was drawn and hit, what was
found, the shrink's way down and the case it wrote, redrawn after every run."""

from __future__ import annotations

import html
import os
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["write_page"]

_STYLE = ("body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
          ".found{background:#fdd}.kept{background:#dfd}")


def _e(value: Any) -> str:
    return html.escape(str(value))


def write_page(root: Path, camp: dict[str, Any]) -> Path:
    """Writes ``root/index.html`` from the campaign record ``camp`` (``campaign.json``)."""
    runs = camp.get("runs") or []
    drawn: Counter[str] = Counter()
    for key, n in (camp.get("seen") or {}).items():
        drawn[key] += n
    hit: Counter[str] = Counter(p for r in runs for p in r.get("points_hit") or [])
    reached: Counter[str] = Counter(p for r in runs for p in r.get("points_reached") or [])
    unreached: Counter[str] = Counter(p for r in runs for p in r.get("unreached") or [])
    finding = camp.get("finding")
    parts = [f"<!doctype html><meta charset=utf-8><title>explore {_e(camp['cluster'])} "
             f"{_e(camp['version'])}</title><style>{_STYLE}</style>",
             f"<h1>Exploration of {_e(camp['cluster'])} {_e(camp['version'])}, seed {_e(camp['seed'])}</h1>",
             f"<p>{len(runs)} runs from {_e(camp['started'])} to {_e(camp.get('finished') or 'now')}; "
             f"command <code>{_e(camp['command'])}</code>.</p>"]
    if camp.get("broker_config"):
        parts.append("<p>The brokers of " + _e(camp["version"]) + " ran with "
                     + ", ".join(f"<code>{_e(k)}={_e(v)}</code>" for k, v in camp["broker_config"].items())
                     + "; the other versions with their defaults.</p>")
    if finding:
        parts.append(f"<p class=found>Found {_e(', '.join(finding['anomalies']))} "
                     f"in run {_e(finding['run'])}.")
        if camp.get("found_case"):
            parts.append(f" Shrunk to <code>{_e(camp['found_case'])}</code>, reproduced in "
                         f"{_e(camp.get('confirmed'))} confirmation runs.")
        elif camp.get("confirmed"):
            parts.append(f" The shrunk schedule showed it in {_e(camp['confirmed'])} confirmation runs, "
                         "too few for a case: none written.")
        parts.append("</p>")
    else:
        parts.append("<p>Nothing found yet.</p>")
    for f in camp.get("flaky") or []:
        parts.append(f"<p class=found>Found {_e(', '.join(f['anomalies']))} in run {_e(f['run'])}, "
                     f"back in {_e(f['rechecked'])} rechecks: not shrunk, the search went on.</p>")
    for f in camp.get("explained") or []:
        parts.append(f"<p>Run {_e(f['run'])}: {_e(', '.join(f['anomalies']))} after an unclean election "
                     f"by the controller ({_e('; '.join(f['unclean']))}). Kafka elects the last known "
                     "leader once no replica of the ISR or the eligible replicas is left, and documents "
                     "that this may lose records: not a broken promise, the search went on.</p>")
    if camp.get("versions"):
        parts.append("<h2>Other versions</h2><ul>" + "".join(
            f"<li>{_e(v)}: {_e(what)}</li>" for v, what in camp["versions"].items()) + "</ul>")
    parts.append("<h2>Drawn and hit</h2><p>A point is reached when its rule fired, and hit when the "
                 "replicas' files at the fault showed its state (a graceful stop, or a load that went on, "
                 "may change it first).</p><table><tr><th>point or fault</th><th>weight (drawn, hit, "
                 "unreached)</th><th>runs that reached it</th><th>runs that hit it</th>"
                 "<th>runs that awaited it in vain</th></tr>" + "".join(
                     f"<tr><td>{_e(k)}</td><td>{n}</td><td>{reached.get(k.removeprefix('point:'), '')}</td>"
                     f"<td>{hit.get(k.removeprefix('point:'), '')}</td>"
                     f"<td>{unreached.get(k.removeprefix('point:'), '')}</td></tr>"
                     for k, n in sorted(drawn.items())) + "</table>")
    if camp.get("tries"):
        parts.append("<h2>Shrinking</h2><table><tr><th>#</th><th>candidate</th><th>size</th>"
                     "<th>kept the failure</th></tr>" + "".join(
                         f"<tr class={'kept' if t['kept'] else ''}><td>{i}</td><td>{_e(t['label'])}</td>"
                         f"<td>{t['size']}</td><td>{'yes' if t['kept'] else 'no'}</td></tr>"
                         for i, t in enumerate(camp["tries"])) + "</table>")
    rows = []
    for r in runs:
        report = Path(r["run_dir"]) / "report.html"
        link = os.path.relpath(report, root) if report.is_absolute() else str(report)
        rows.append(f"<tr class={'found' if r.get('found') else ''}><td>{r['index']}</td>"
                    f"<td>{_e(r['purpose'])}</td><td>{_e(r.get('version') or '')}</td><td>{r['seed']}</td>"
                    f"<td>{_e(r['label'])}</td><td><a href='{_e(link)}'>{_e(r['verdict'])}</a></td>"
                    f"<td>{_e(', '.join(r.get('found') or []))}"
                    + (f" ({_e(', '.join(r['explained']))} after an unclean election)" if r.get('explained')
                       else "") + "</td>"
                    f"<td>{_e(', '.join(r.get('points_hit') or []))}</td>"
                    f"<td>{r['seconds']}</td><td>{_e(r.get('error') or '')}</td></tr>")
    parts.append("<h2>Runs</h2><table><tr><th>#</th><th>purpose</th><th>version</th><th>seed</th>"
                 "<th>schedule</th><th>verdict</th><th>found</th><th>points hit</th><th>s</th>"
                 "<th>error</th></tr>" + "".join(rows) + "</table>")
    out = root / "index.html"
    out.write_text("".join(parts), encoding="utf-8")
    return out
