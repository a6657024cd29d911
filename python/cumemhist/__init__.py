"""cumemhist from Python: marks and ranges in the record of the CUDA memory history.

    import cumemhist
    cumemhist.mark("step 3")            # a point in the trace (`leaks` measures growth between them)
    with cumemhist.range("forward"):    # a named range (START/END in memory_viz)
        ...

They go through the recorder's C API when libcumemhist.so is loaded (`cumemhist record`, or
LD_PRELOAD), and do nothing when it is not: the same code runs with and without the recorder.
Pure Python, no build step.
"""
import ctypes
import contextlib

__all__ = ["mark", "range", "recording", "dump"]

_lib = None
_looked = False


def _recorder():
    global _lib, _looked
    if not _looked:
        _looked = True
        try:
            lib = ctypes.CDLL(None)
            if hasattr(lib, "cmh_mark"):
                lib.cmh_mark.argtypes = [ctypes.c_char_p]
                lib.cmh_range_push.argtypes = [ctypes.c_char_p]
                lib.cmh_range_pop.argtypes = []
                lib.cmh_dump_snapshot.argtypes = [ctypes.c_char_p]
                _lib = lib
        except OSError:
            _lib = None
    return _lib


def recording():
    """True when the recorder is loaded in this process."""
    return _recorder() is not None


def mark(name):
    """Drop a mark into every device's trace (a no-op without the recorder)."""
    lib = _recorder()
    if lib is not None:
        lib.cmh_mark(str(name).encode())


@contextlib.contextmanager
def range(name):  # noqa: A001 - the name users expect, as in NVTX
    """A named range around the block (a no-op without the recorder)."""
    lib = _recorder()
    if lib is not None:
        lib.cmh_range_push(str(name).encode())
    try:
        yield
    finally:
        if lib is not None:
            lib.cmh_range_pop()


def dump(path=None):
    """Write a snapshot now (to path, or where the recorder writes); False without the recorder."""
    lib = _recorder()
    if lib is None:
        return False
    return lib.cmh_dump_snapshot(None if path is None else str(path).encode()) == 0
