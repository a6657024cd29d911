"""torch._C stand-in: the out-of-memory observer PyTorch calls before raising."""
observers = []


def _cuda_attach_out_of_memory_observer(fn):
    observers.append(fn)


def _standin_oom(device=0, alloc=1 << 30, device_alloc=0, device_free=0):
    """What PyTorch does at its OOM: the observers first."""
    for fn in observers:
        fn(device, alloc, device_alloc, device_free)
