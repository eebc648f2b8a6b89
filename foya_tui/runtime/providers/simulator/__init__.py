"""Provides the offline simulator: deterministic, useful replies without any model.

The simulator is what a new user without an API key talks to, so its replies describe things
it can really measure: the conversation so far, the working directory and the context budget.
LiteLLM reaches it as a custom provider (the adapter lives in `litellm_client.py`, the only
module that imports LiteLLM); this package is plain Python, split by behaviour:

- `provider.py`: `Simulator`, which checks a request and hands it to one of the behaviours below.
- `chat.py`: an ordinary turn (read-only tool calls, then a reply from what they found).
- `explore.py`: "explore N steps", a long agent turn, and the execution frontier (SPEC K-1).
- `summary.py`: a five-section summary for a compaction request (SPEC C-8, C-9).
- `native.py`: provider-native compaction on `foya-sim/native` (SPEC C-11, R-2).
- `faults.py`: the `FOYA_SIM_FAULTS` knobs that make requests fail or replies defective.
- `messages.py` and `reply.py`: what they all read from a request, and what they answer with.
"""

from foya_tui.runtime.providers.simulator.explore import EXPLORE_GREP_PATTERN, explored_steps
from foya_tui.runtime.providers.simulator.faults import FAULTS_ENV, FaultPlan, SimulatorFault
from foya_tui.runtime.providers.simulator.native import (
    NATIVE_INVALID_TEXT,
    NATIVE_STATE_FORMAT,
    NATIVE_SUMMARY_CHARS,
    native_state_of,
)
from foya_tui.runtime.providers.simulator.provider import Simulator
from foya_tui.runtime.providers.simulator.summary import (
    SUMMARY_TOKEN_CAP,
    TRUNCATION_MARKER,
    is_compaction_request,
)

__all__ = [
    "EXPLORE_GREP_PATTERN",
    "FAULTS_ENV",
    "NATIVE_INVALID_TEXT",
    "NATIVE_STATE_FORMAT",
    "NATIVE_SUMMARY_CHARS",
    "SUMMARY_TOKEN_CAP",
    "TRUNCATION_MARKER",
    "FaultPlan",
    "Simulator",
    "SimulatorFault",
    "explored_steps",
    "is_compaction_request",
    "native_state_of",
]
