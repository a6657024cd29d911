"""cumemhist's Python start-up hook: co-records PyTorch's own memory history.

`cumemhist record` puts this directory first on PYTHONPATH.  It
  - runs the user's own sitecustomize, if there is one, as if this one were not here;
  - waits, costing nothing, for the program to import torch (it never imports it itself); then
    switches PyTorch's history on with the recorder's options (CUMEMHIST_ENABLED, _CONTEXT,
    _MAX_ENTRIES mapped onto torch.cuda.memory._record_memory_history, in the form that
    PyTorch's version takes: 2.1+, 2.0, or 1.13's bool alone), tells the recorder never to wait
    for the GIL to read a Python stack (see recorder.h, cmh_set_python_stacks), asks the recorder to
    take PyTorch's snapshot with each of its dumps, dumps both at PyTorch's own out-of-memory
    error (its OOM observer, before the exception reaches the program), and leaves PyTorch's
    last snapshot for the recorder's exit dump;
  - says one line, and does nothing else, with a PyTorch built without CUDA;
  - is off with CUMEMHIST_TORCH=0 (`record --no-torch`).
Whatever the program, each threading.Thread it starts gives the recorder its name
(cmh_thread_name), which the reports show instead of the OS's ('python3').
PyTorch's APIs here are private and change between releases: when one is missing or refuses,
it says so once on stderr and the recording goes on at the driver level alone.  It never
raises into the program.

With a plain LD_PRELOAD, put this directory on PYTHONPATH yourself:
    PYTHONPATH=/path/to/cumemhist/python/cumemhist/_startup:$PYTHONPATH \\
        LD_PRELOAD=libcumemhist.so python train.py
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_user_sitecustomize():
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


def _install():
    if os.environ.get("CUMEMHIST_TORCH", "1") == "0":
        return
    import importlib.abc
    import importlib.util

    class _Loader(importlib.abc.Loader):
        def __init__(self, inner):
            self.inner = inner

        def create_module(self, spec):
            return self.inner.create_module(spec)

        def exec_module(self, module):
            self.inner.exec_module(module)
            _on_torch(module)

        def __getattr__(self, name):  # get_resource_reader, is_package, ...
            return getattr(self.inner, name)

    class _TorchFinder(importlib.abc.MetaPathFinder):
        busy = False

        def find_spec(self, name, path=None, target=None):
            if name != "torch" or _TorchFinder.busy:
                return None
            _TorchFinder.busy = True
            try:
                spec = importlib.util.find_spec(name)
            finally:
                _TorchFinder.busy = False
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            spec.loader = _Loader(spec.loader)
            sys.meta_path.remove(self)  # once is enough
            return spec

    sys.meta_path.insert(0, _TorchFinder())


_said = set()


def _say(what):
    if what not in _said:
        _said.add(what)
        sys.stderr.write("cumemhist: %s; recording the driver level alone\n" % what)


_keep = []  # the ctypes callbacks must outlive every call


def _on_torch(torch):
    try:
        _corecord(torch)
    except Exception as e:  # never into the program
        _say("PyTorch co-recording failed (%s: %s)" % (type(e).__name__, e))


def _record(record, enabled, context, max_entries):
    """_record_memory_history in the form this PyTorch takes: 2.1 and later take
    enabled/context/stacks/max_entries; 2.0 a bool with record_context, trace_alloc_max_entries
    and trace_alloc_record_context; 1.13 a bool alone (no trace, no context options)."""
    import inspect

    try:
        params = inspect.signature(record).parameters
    except (TypeError, ValueError):
        params = {"context": None}
    kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    if "context" in params or kw:
        record(enabled="state" if enabled == "state" else "all",
               context=None if context == "none" else context,
               stacks="all" if context in ("alloc", "all") else "python",
               max_entries=max_entries)
    elif "trace_alloc_max_entries" in params:
        record(True, record_context=context != "none",
               trace_alloc_max_entries=1 if enabled == "state" else min(max_entries, 2**31 - 1),
               trace_alloc_record_context=context in ("alloc", "all"))
    else:
        record(True)


def _corecord(torch):
    import ctypes

    env = os.environ
    enabled = env.get("CUMEMHIST_ENABLED", "all").lower()
    if enabled in ("off", "0", "none", "false"):
        return
    context = env.get("CUMEMHIST_CONTEXT", "all").lower()
    try:
        max_entries = int(env.get("CUMEMHIST_MAX_ENTRIES", "0")) or sys.maxsize
    except ValueError:
        max_entries = sys.maxsize
    memory = getattr(getattr(torch, "cuda", None), "memory", None)
    record = getattr(memory, "_record_memory_history", None)
    snapshot = getattr(memory, "_snapshot", None)
    if record is None or snapshot is None:
        _say("this PyTorch has no torch.cuda.memory._record_memory_history/_snapshot")
        return
    compiled = getattr(getattr(torch, "cuda", None), "_is_compiled", None)
    if compiled is not None and not compiled():  # a CPU build (Debian's python3-torch)
        _say("this PyTorch has no CUDA: PyTorch's history is unavailable")
        return
    try:
        lib = ctypes.CDLL(None)
        lib.cmh_set_python_stacks.argtypes = [ctypes.c_int]
        # PyTorch frees device memory under the GIL while its allocator holds a lock that a
        # thread calling the driver (GIL released) also holds: that thread must never wait for
        # the GIL to read its Python stack (CMH_PYTHON_HELD: its frames are read without the
        # GIL where the interpreter's layout is known); PyTorch's own history has the lines of
        # its tensors.
        lib.cmh_set_python_stacks(1)
    except (OSError, AttributeError):
        lib = None
    try:
        _record(record, enabled, context, max_entries)
    except Exception as e:
        _say("PyTorch's _record_memory_history refused (%s: %s)" % (type(e).__name__, e))
        return
    try:
        hook = lib.cmh_set_torch_snapshot_hook
        lib.cmh_torch_snapshot_file
    except AttributeError:
        return  # the recorder is not loaded: PyTorch records for the program's own dumps

    import pickle

    def write(path):
        tmp = "%s.tmp.%d" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(snapshot(), f, protocol=4)
            os.replace(tmp, path)
        except BaseException:
            # a snapshot refused half-written: nothing of it left beside the record
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

    def on_dump(path, arg):
        try:
            write(path.decode())
            return 1
        except Exception as e:
            _say("PyTorch's snapshot could not be taken (%s: %s)" % (type(e).__name__, e))
            return 0

    cb = CB(on_dump)
    _keep.append(cb)
    hook.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    hook(ctypes.cast(cb, ctypes.c_void_p), None)

    dump = lib.cmh_dump_snapshot
    dump.argtypes = [ctypes.c_char_p]
    attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        _say("this PyTorch has no out-of-memory observer: its OOMs are not dumped with ours")
    else:
        def on_oom(device, alloc, device_alloc, device_free):
            dump(None)  # ours, and PyTorch's through the hook, before the exception

        try:
            attach(on_oom)
        except Exception as e:
            _say("PyTorch refused the out-of-memory observer (%s: %s)" % (type(e).__name__, e))

    import atexit

    def at_exit():
        # the interpreter will be gone when the recorder's exit dump runs: leave a file instead
        hook(None, None)
        buf = ctypes.create_string_buffer(4200)
        lib.cmh_output_path.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        if lib.cmh_output_path(buf, len(buf)) != 0:
            return
        path = buf.value.decode() + ".torch.pickle"
        try:
            write(path)
        except Exception as e:
            _say("PyTorch's last snapshot could not be taken (%s: %s)" % (type(e).__name__, e))
            return
        lib.cmh_torch_snapshot_file.argtypes = [ctypes.c_char_p]
        lib.cmh_torch_snapshot_file(path.encode())

    atexit.register(at_exit)


def _name_threads():
    """Each threading.Thread tells the recorder its name as it starts (cmh_thread_name), so the
    reports call it 'leaker', not the OS's 'python3'.  Once per thread, before its first call."""
    import ctypes
    import threading

    lib = ctypes.CDLL(None)
    if not hasattr(lib, "cmh_thread_name"):
        return
    name_fn = lib.cmh_thread_name
    name_fn.argtypes = [ctypes.c_char_p]
    inner = threading.Thread._bootstrap_inner

    def _bootstrap_inner(self):
        try:
            name_fn(str(self.name).encode("utf-8", "replace"))
        except Exception:
            pass
        return inner(self)

    threading.Thread._bootstrap_inner = _bootstrap_inner


try:
    _chain_user_sitecustomize()
finally:
    try:
        _name_threads()
    except Exception:  # a Python without threading's internals as we know them: OS names
        pass
    try:
        _install()
    except Exception as e:  # never break the program's start
        sys.stderr.write("cumemhist: the PyTorch start-up hook failed (%s); recording the driver level alone\n" % e)
