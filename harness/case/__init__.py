"""Case files: load and validate a YAML case into frozen, typed dataclasses.

``load_case(path)`` validates the whole file before anything runs; any
problem is one :class:`harness.errors.CaseError` naming file, line and field.
The schema is documented in ``cases/SCHEMA.md``.
"""

from __future__ import annotations

from ._files import MAX_CASE_BYTES, MAX_RULE_BYTES
from ._load import find_case_files, load_case, load_case_text, validate_paths
from ._nodes import load_nodes
from .model import (
                    ACTIONS,
                    ANOMALIES,
                    CONDITIONS,
                    MAX_SEED,
                    ROLE_ANY_BROKER,
                    ROLES_KAFKA,
                    ROLES_PULSAR,
                    AwaitArgs,
                    Case,
                    ChaosArgs,
                    ClientSpec,
                    ConsumeArgs,
                    CopyArgs,
                    Expect,
                    FaultArgs,
                    HealArgs,
                    InjectArgs,
                    ProduceArgs,
                    QuorumArgs,
                    ReassignArgs,
                    ReleaseArgs,
                    Selector,
                    SplitArgs,
                    Step,
                    StepArgs,
                    SubscribeArgs,
                    TopicSpec,
                    TxnArgs,
                    UnloadArgs,
                    roles_for,
)

__all__ = [
    "load_case", "load_case_text", "find_case_files", "validate_paths", "load_nodes", "MAX_CASE_BYTES",
    "MAX_RULE_BYTES",
    "ROLES_KAFKA", "ROLES_PULSAR", "ROLE_ANY_BROKER", "roles_for",
    "ACTIONS", "CONDITIONS", "ANOMALIES", "MAX_SEED",
    "Case", "TopicSpec", "ClientSpec", "Selector", "Step", "StepArgs", "ProduceArgs", "TxnArgs",
    "ConsumeArgs", "CopyArgs", "FaultArgs", "HealArgs", "AwaitArgs", "InjectArgs", "UnloadArgs", "ChaosArgs",
    "ReleaseArgs", "SubscribeArgs", "ReassignArgs", "QuorumArgs", "SplitArgs", "Expect",
]
