"""A test hook for racing a dream deterministically: `ROCKMEM_DREAM_HOOK=point:action` makes the process stop
(SIGSTOP, for a test to act and then SIGCONT it) or die (SIGKILL) when a dream reaches `point`:
- `planned`: the entries are read and the changes decided, nothing written yet;
- `merged`: a merged memory is written, its sources not yet archived.
Unset in normal use (one environment lookup per point); POSIX only.
"""

from __future__ import annotations

import os
import signal

HOOK_ENV = "ROCKMEM_DREAM_HOOK"
_SIGNALS = {"stop": "SIGSTOP", "kill": "SIGKILL"}


def checkpoint(point: str) -> None:
    wanted, _, action = os.environ.get(HOOK_ENV, "").partition(":")
    if wanted == point and action in _SIGNALS and hasattr(signal, _SIGNALS[action]):
        os.kill(os.getpid(), getattr(signal, _SIGNALS[action]))
