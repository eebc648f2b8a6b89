"""Provides the simulator's fault knobs: the `FOYA_SIM_FAULTS` plan and its countdown.

Fault knobs (tests and demos) come from `FOYA_SIM_FAULTS`, a comma-separated list of names,
each optionally `xN` to fire only N times (e.g. `429x2` fails twice, then answers):

- `overflow`, `429`, `quota`: the request fails with that provider error.
- `truncate`: the reply is cut in half with finish reason "length".
- `summary-truncated`: the summary stops mid-way with a visible `…[truncated]` marker, its later
  sections missing (finish reason "stop").
- `summary-sections`: the summary's sections are out of order and one is missing ("stop").
- `summary-length`: a partial summary with finish reason "length".

- `native-invalid`: a native compaction answers text that is not JSON (SPEC C-11).
- `native-unsupported`: a native compaction fails as a bad request: unsupported on this route.

The first four fire on whichever request comes first, compaction requests included; the
`summary-*` knobs fire only on text compaction requests and the `native-*` knobs only on native
compaction requests (a reply that could not show them must not use them up).
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from dataclasses import dataclass

FAULTS_ENV = "FOYA_SIM_FAULTS"
SUMMARY_FAULT_NAMES = frozenset({"summary-truncated", "summary-sections", "summary-length"})
NATIVE_FAULT_NAMES = frozenset({"native-invalid", "native-unsupported"})
CHAT_FAULT_NAMES = frozenset({"overflow-midstream"})
FAULT_NAMES = (
    frozenset({"overflow", "429", "quota", "truncate"})
    | SUMMARY_FAULT_NAMES
    | NATIVE_FAULT_NAMES
    | CHAT_FAULT_NAMES
)


class SimulatorFault(Exception):
    """A simulated provider failure; the LiteLLM adapter raises LiteLLM's matching error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "overflow" | "429" | "quota"
        self.message = message


@dataclass(frozen=True)
class FaultPlan:
    """Which faults fire, and how many times (None = every request)."""

    faults: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        faults = []
        for item in filter(None, (part.strip().lower() for part in spec.split(","))):
            match = re.fullmatch(r"(.+?)(?:x(\d+))?", item)
            if not match or match.group(1) not in FAULT_NAMES:
                raise ValueError(
                    f"{FAULTS_ENV}: unknown fault {item!r} (known: {', '.join(sorted(FAULT_NAMES))})"
                )
            faults.append((match.group(1), int(match.group(2)) if match.group(2) else None))
        return cls(tuple(faults))


class FaultBudget:
    """The knobs still to fire: the plan in `FOYA_SIM_FAULTS`, read on every request, with the
    `xN` counts it has used up (thread-safe: one simulator serves every session in the process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fault_spec = ""
        self._fired: Counter[str] = Counter()

    def take(self, compaction: bool, native: bool = False, only: frozenset[str] | None = None) -> str | None:
        """The fault to inject for this request, counting down `xN` budgets.

        `summary-*` faults are skipped unless this is a text compaction request and `native-*` faults
        unless it is a native one: only there do they mean something.
        """
        spec = os.environ.get(FAULTS_ENV, "")
        try:
            plan = FaultPlan.parse(spec)
        except ValueError as exc:
            raise SimulatorFault("invalid", str(exc)) from None
        with self._lock:
            if spec != self._fault_spec:  # a new plan starts its counts afresh
                self._fault_spec, self._fired = spec, Counter()
            for name, times in plan.faults:
                if name in SUMMARY_FAULT_NAMES and not compaction:
                    continue
                if name in NATIVE_FAULT_NAMES and not native:
                    continue
                # Chat-reply faults are asked for separately, once the reply is known to be text.
                if (name in CHAT_FAULT_NAMES) != (only is not None) or (
                    only is not None and name not in only
                ):
                    continue
                if times is None or self._fired[name] < times:
                    self._fired[name] += 1
                    return name
        return None
