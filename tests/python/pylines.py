"""Allocations from code shapes that exercise CPython's location table (tests/pystack_test.sh):
calls spanning lines, a call past column 127 (the long form), jumps back (negative line deltas),
large line gaps, comprehensions, a class body, a coroutine, exception handlers, a with block,
decorated and nested functions, and names outside ASCII (one, two and four bytes a character).
Each allocation has its own size (n MiB), with the GIL released (ctypes.CDLL), so that the
recorder's GIL-free read and the C API's walk can be compared frame by frame (after 70 stacks
read first, so that the read has gone from system calls to plain loads).  With "reuse": 100
functions compiled, called and dropped in turn, each from its own line of one of two files, so
that a code object's address is reused by another's."""
import asyncio
import contextlib
import ctypes
import sys

cuda = ctypes.CDLL("libcuda.so.1")
p, dev, ctx = ctypes.c_uint64(), ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0


def warm():  # 70 stacks read first: past the 64 after which the recorder's reads are plain loads
    for _ in range(70):
        assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4096)) == 0
        assert cuda.cuMemFree_v2(p) == 0


def grab_b(n):
    return cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))


def grab(n):
    return cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n << 20))


def spanning(n):
    return grab(
        n
    )


def wide(n):
    x = 0; y = 1; z = 2; w = 3; v = 4; u = 5; t = 6; s = 7; r = 8; q = 9; o = 10; m = 11; k = 12; j = 13; return grab(n + x * y * z * w * v * u * t * s * r * q * o * m * k * j)


def loop(n):
    for i in range(3):
        if i == 2:
            grab(n)
        else:
            pass


def gap(n):
    a = n
    # a long stretch without code, so the line delta does not fit the short forms
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    #
    return grab(a)


def comprehension(n):
    return [grab(n) for _ in range(1)]


class Body:
    grabbed = grab(7)


async def coroutine(n):
    await asyncio.sleep(0)
    return grab(n)


def handler(n):
    try:
        raise ValueError
    except ValueError:
        return grab(n)
    finally:
        pass


def with_block(n):
    with contextlib.nullcontext():
        return grab(n)


def deco(f):
    def inner(*a):
        return f(*a)
    return inner


@deco
def decorated(n):
    def nested():
        return grab(n)
    return nested()


def größe(n):
    return grab(n)


def 数据(n):
    return grab(n)


def 𠀋(n):
    return grab(n)


if sys.argv[1:] == ["reuse"]:  # code objects made and dropped in turn: their addresses reused
    warm()
    seen = set()
    for i in range(100):
        # the same bytecode each time (a blank line has none): only the file and the line differ
        src = "def f(n):\n" + "\n" * (i % 2) + "    return grab_b(n)\n"
        ns = {"grab_b": grab_b}
        exec(compile(src, "gen%d.py" % (i % 3), "exec"), ns)
        seen.add(id(ns["f"].__code__))
        ns["f"](4096 * (i + 1))
        ns.clear()  # f and its globals hold each other: freed now, not at a collection
    print("code addresses", len(seen))
    sys.exit(0)
warm()
spanning(1)
wide(2)
loop(3)
gap(4)
comprehension(5)
asyncio.run(coroutine(6))
handler(8)
with_block(9)
decorated(10)
größe(11)
数据(12)
𠀋(13)
(lambda n: grab(n))(14)
