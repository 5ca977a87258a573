"""Fuzzing: whatever the text, load_case_text returns a Case or raises one CaseError with a line."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.case import ACTIONS, ANOMALIES, CONDITIONS, ROLES_KAFKA, ROLES_PULSAR, Case, load_case_text
from harness.errors import CaseError
from harness.testing.mutation import slots as json_slots

GOOD = sorted((Path(__file__).resolve().parents[2] / "data" / "cases" / "good").glob("*.yaml"))
TEXTS = {path: path.read_text(encoding="utf-8") for path in GOOD}
DOCS = {path: yaml.safe_load(text) for path, text in TEXTS.items()}

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Words the schema knows, so that mutations get past the first checks and reach deep ones.
WORDS = st.sampled_from(
    ACTIONS + CONDITIONS + ANOMALIES + ROLES_KAFKA + ROLES_PULSAR
    + ("kafka", "pulsar", "kafka-zk", "kafka-kraft", "zk", "kafka-1", "bookie-1", "broker-2",
       "3.9.2", "4.1.2", "others", "all", "next", "both", "in", "out", "C1", "C4", "P1", "bg",
       "10s", "500ms", "2m", "-1", "0", "1", "node", "partition", "count", "duration", "name",
       "background", "timeout", "point", "rule", "size", "pattern", "from", "observe", "Shared",
       "rules/truncate.btm", "", " ", "~", "null", "true", "yes", "2024-01-01", "<<", "="))
SCALARS = (st.none() | st.booleans() | st.integers(-3, 10) | st.integers()
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12) | WORDS)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(WORDS | st.text(max_size=6), inner, max_size=3),
                      max_leaves=6)
YAML_TOKENS = st.sampled_from(
    ("\n", "  ", "- ", ": ", ":", "{", "}", "[", "]", ", ", "&a ", "*a", "!!int ", "!!str ", "!x ",
     "'", '"', "#", "---\n", "...\n", "|\n", ">\n", "? ", "%YAML 1.1\n", "<<: ", "\t", "\\", "@",
     "system: kafka\n", "cluster: kafka-zk\n", "steps:\n", "expect:\n", "topic:\n"))


def _check(text: str, path: str) -> None:
    """The property: a Case, or a CaseError that names this file and a line within it."""
    try:
        case = load_case_text(text, path)
    except CaseError as err:
        assert err.path == path
        assert err.line is not None and 1 <= err.line <= len(text.splitlines()) + 1, str(err)
        assert str(err).startswith(f"{path}:{err.line}: ")
    else:
        assert isinstance(case, Case)


@FUZZ
@given(st.text(max_size=200))
def test_any_text(text: str) -> None:
    _check(text, "fuzz.yaml")


@FUZZ
@given(st.lists(YAML_TOKENS | WORDS | st.text(max_size=3), max_size=40).map("".join))
def test_yaml_like_text(text: str) -> None:
    _check(text, "fuzz.yaml")


@FUZZ
@given(st.data())
def test_mutated_good_cases(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(GOOD))
    doc = copy.deepcopy(DOCS[path])
    for _ in range(data.draw(st.integers(1, 3))):
        slots = json_slots(doc)
        if not slots:
            break
        container, key = data.draw(st.sampled_from(slots))
        action = data.draw(st.sampled_from(("delete", "replace", "rename", "wrap")))
        if action == "delete":
            del container[key]
        elif action == "replace":
            container[key] = data.draw(VALUES)
        elif action == "wrap":
            container[key] = [container[key]]
        elif isinstance(container, dict):
            container[data.draw(WORDS)] = container.pop(key)
    _check(yaml.safe_dump(doc, sort_keys=False), str(path))


@FUZZ
@given(st.data())
def test_edited_good_texts(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(GOOD))
    text = TEXTS[path]
    cut = data.draw(st.integers(0, len(text)))
    action = data.draw(st.sampled_from(("truncate", "insert", "drop-line", "indent")))
    if action == "truncate":
        text = text[:cut]
    elif action == "insert":
        text = text[:cut] + data.draw(YAML_TOKENS | WORDS) + text[cut:]
    else:
        lines = text.splitlines(keepends=True)
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = "" if action == "drop-line" else "  " + lines[i]
        text = "".join(lines)
    _check(text, str(path))
