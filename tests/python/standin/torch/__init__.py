"""A stand-in for torch with the names cumemhist's start-up hook uses, for tests without a GPU
(tests/corecord_test.sh).  It records how it was called in $STANDIN_LOG.  STANDIN_MODE:
  missing - no _record_memory_history
  raises  - _record_memory_history raises
  v2.0, v1.13 - _record_memory_history with that PyTorch version's signature
  (unset) - everything works; _snapshot() returns $STANDIN_SNAPSHOT (a real PyTorch pickle)
STANDIN_FORK=1: _snapshot() forks a child first, as PyTorch's does to symbolize C++ frames.
STANDIN_SNAPSHOT_RAISES=1: _snapshot() raises.
STANDIN_GATE=PATH: _snapshot() waits until PATH exists (at most 30 s), a slow snapshot.
"""
import json
import os


def _log(**kw):
    path = os.environ.get("STANDIN_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(kw) + "\n")


_log(event="import")

from . import cuda  # noqa: E402,F401
from . import _C  # noqa: E402,F401
