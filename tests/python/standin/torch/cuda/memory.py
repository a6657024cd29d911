"""torch.cuda.memory stand-in."""
import os
import pickle

from .. import _log

_mode = os.environ.get("STANDIN_MODE", "")

if _mode == "v2.0":  # PyTorch 2.0's signature: a bool and the trace options

    def _record_memory_history(enabled, record_context=True, trace_alloc_max_entries=1,
                               trace_alloc_record_context=False, device=None, _enable_expensive_cpp=False):
        _log(event="record", enabled=enabled, record_context=record_context,
             trace_alloc_max_entries=trace_alloc_max_entries, trace_alloc_record_context=trace_alloc_record_context)

elif _mode == "v1.13":  # PyTorch 1.13's (Debian's python3-torch): a bool alone

    def _record_memory_history(enabled, device=None):
        _log(event="record", enabled=enabled)

elif _mode != "missing":

    def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=None):
        _log(event="record", enabled=enabled, context=context, stacks=stacks, max_entries=max_entries)
        if _mode == "raises":
            raise RuntimeError("record_context_cpp is not supported on this platform")


def _snapshot():
    _log(event="snapshot")
    if os.environ.get("STANDIN_SNAPSHOT_RAISES") == "1":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    gate = os.environ.get("STANDIN_GATE")
    if gate:
        # a slow snapshot (PyTorch's of a long history takes seconds): held until the test
        # opens the gate, so that a second dump is asked for while this one is being taken
        import time

        for _ in range(3000):
            if os.path.exists(gate):
                break
            time.sleep(0.01)
    if os.environ.get("STANDIN_UNHOOK") == "1":
        # the program's exit handler taking the recorder's hook away (hook(None, None)) while a
        # dump is taking this snapshot, as at_exit does beside another thread's dump
        import ctypes

        ctypes.CDLL(None).cmh_set_torch_snapshot_hook(None, None)
    if os.environ.get("STANDIN_FORK") == "1":
        # as PyTorch's does when its history has C++ stacks: their frames are symbolized by
        # addr2line children, forked from the caller (fork, not posix_spawn: the fork handlers run)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    with open(os.environ["STANDIN_SNAPSHOT"], "rb") as f:
        return pickle.load(f)
