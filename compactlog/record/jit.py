"""``@njit`` that costs nothing until the work is worth numba.

Importing numba and loading one cached kernel cost ~0.4 s, more than everything else a command on a
small data dir does. So this module's ``njit`` returns a ``Kernel``: a kernel declared with
``work=`` (an estimate, in bytes, of what one call walks) runs its function's plain-Python body
while the process's summed work stays under ``PYTHON_BUDGET``; past that, or for a kernel without
``work=``, numba is imported and the kernel's dispatcher built (machine code from the cache that
``make venv`` filled). From then on every kernel of the process runs compiled. A kernel called from
one running in Python runs in Python too.

The dispatchers are numba's own, built from the same function code over a copy of its module's
globals in which every Kernel is replaced by its dispatcher (and a module holding kernels by a
module of dispatchers): compiled kernels call and inline each other as before, and hit the same
cache entries (numba keys them by file, qualified name, line and bytecode).

Before either, a call whose argument types match a signature compiled ahead of time
(``compactlog/aot.py``: an extension module ``make venv`` builds with numba.pycc from the signatures
the warm-up compiled) runs that machine code, and numba is never imported: a one-shot clean of
the reference workload saved ~0.6 CPU-s, a ``verify`` of 1.4 MB ~0.6. The build is not used once
a kernel source (or a module one imports) changed since it was made, nor with
``COMPACTLOG_AOT=0``.

``COMPACTLOG_KERNELS=jit`` always compiles with numba (the warm-up, the extension's build);
``=python`` never compiles (tests comparing the two).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
import types as pytypes

import numpy as np

# bytes of kernel work run in Python per process: ~0.2 s of it, half of what numba's import and
# first cached-code load cost (a consume of a 268 KB segment: 0.47 s in Python, 0.94 s compiled)
PYTHON_BUDGET = 256 * 1024

_MODES = ("auto", "jit", "python")
_mode = os.environ.get("COMPACTLOG_KERNELS", "auto") or "auto"
if _mode not in _MODES:
    print(f"compactlog: COMPACTLOG_KERNELS={_mode!r} is not one of {', '.join(_MODES)}; using auto",
          file=sys.stderr)
    _mode = "auto"


class _Depth(threading.local):
    value = 0


class _NoLoad(threading.local):
    value = 0               # > 0: this thread never waits for numba (``without_numba``)
    missed = None           # the kernels that ran in Python meanwhile (a set, while one is kept)


_in_python = _Depth()        # > 0 inside a kernel running in Python (its callees stay there)
_no_load = _NoLoad()
_python_work = 0             # summed work run in Python (a race between threads only moves when)
_compiled = False            # numba is in use: every kernel call goes to its dispatcher
_build_lock = threading.RLock()
# the extension's table is loaded under a lock of its own: a thread loading numba holds
# _build_lock for ~0.6 s (the broker's warm-up), and a call it could answer ahead of time must
# not wait for that
_aot_lock = threading.Lock()
_shadows: dict[str, pytypes.ModuleType] = {}


def compiled() -> bool:
    """Whether numba has been loaded for a kernel in this process."""
    return _compiled


_warm = False               # a warm-up ran the kernels a caller needs (``mark_warm``)


def mark_warm() -> None:
    """Say that the kernels a long-running process needs are loaded (the broker's warm-up,
    ``server/warm.py``): from now on no kernel call of theirs waits for numba."""
    global _warm
    _warm = True


def warm() -> bool:
    """Whether a kernel call can no longer wait for numba's import or cache load: the warm-up
    ran, or kernels never compile (``COMPACTLOG_KERNELS=python``)."""
    return _warm or _mode == "python"


class without_numba:
    """In this thread, a kernel call that would import numba or build a dispatcher runs its
    plain-Python body instead (correct, slower on large inputs): for threads that must never wait
    ~0.5 s for numba, the broker's event loop (its quick answers are small by construction). Entered
    with ``record=True`` it also yields the set of kernels that ran in Python meanwhile: what a
    warm-up on the ahead-of-time kernels alone did not cover (``server/warm.py``)."""

    def __init__(self, record: bool = False):
        self.record = record
        self._kept = None

    def __enter__(self):
        _no_load.value += 1
        if self.record:
            self._kept = _no_load.missed
            _no_load.missed = set()
            return _no_load.missed
        return None

    def __exit__(self, *exc):
        _no_load.value -= 1
        if self.record:
            _no_load.missed = self._kept
        return False


def never_wait_for_numba_in_this_thread() -> None:
    """``without_numba`` for the rest of this thread's life (the broker's event loop)."""
    _no_load.value += 1


def aot_ready() -> bool:
    """Whether this process's kernels can run from the ahead-of-time build (present, fresh, for
    this CPU, mode auto): loads its table."""
    if not _aot_wanted:
        return False
    global _aot_kernels
    if _aot_kernels is None:
        with _aot_lock:
            if _aot_kernels is None:
                _aot_kernels = _load_aot()
    return bool(_aot_kernels)


def span(buf, start, end, *_):
    """The work of a kernel over ``buf[start:end]``."""
    return end - start


class Kernel:
    """A numba kernel that runs in plain Python while the work is small (see the module's doc)."""

    def __init__(self, fn, options: dict, work):
        self.fn = fn
        self.options = options
        self.work = work
        self._dispatcher = None        # published once every module it may call is built
        self._aot = None               # argument types -> ahead-of-time function ({}: none)
        self._building = None
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args):
        d = self._dispatcher
        if d is not None and _mode != "python" and not _in_python.value:    # compiled: one test per call
            return d(*args)
        if _in_python.value:
            return self.fn(*args)
        aot = self._aot
        if aot is None:
            aot = self._aot = _aot_table(self)
        if aot:                                  # compiled ahead of time for these argument types
            f = aot.get(typekey(args))
            if f is not None:
                return f(*args)
        if self.work is not None and _mode != "jit":
            if _mode == "python":
                return self.python(*args)
            if not _compiled:
                work = self.work(*args)
                if _python_work + work <= PYTHON_BUDGET:
                    _count(work)
                    return self._in_python_instead(args)
        if _no_load.value and (not _loaded or self._dispatcher is None):
            return self._in_python_instead(args)      # numba not at hand: this thread does not wait for it
        if not _loaded:
            return _first_compiled_call(self, args)
        return self.dispatcher(*args)

    def _in_python_instead(self, args):
        missed = _no_load.missed
        if missed is not None:
            missed.add(f"{self.__module__}.{self.__qualname__}")
        return self.python(*args)

    def python(self, *args):
        """The kernel's plain-Python body on ``args`` (what a small call runs)."""
        _in_python.value += 1
        try:
            with np.errstate(all="ignore"):     # numba's integers wrap silently; so do these
                return self.fn(*args)
        finally:
            _in_python.value -= 1

    @property
    def dispatcher(self):
        """numba's dispatcher of this kernel (numba is imported and every kernel switches to it)."""
        if self._dispatcher is None:
            with _build_lock:
                if self._dispatcher is None:
                    _build(self.fn.__module__)
        return self._dispatcher

    @property
    def py_func(self):
        return self.fn

    def __reduce__(self):
        # pickled by reference (Spark's closures), as a module-level function is
        return _kernel_named, (self.__module__, self.__qualname__)

    def __repr__(self):
        return f"<kernel {self.__module__}.{self.__qualname__}>"


_loaded = False            # the first compiled call is made (_first_compiled_call)


def _first_compiled_call(kernel: Kernel, args):
    """The process's first compiled call (numba's import and its first cached kernel), with the
    cyclic collector paused: they create some hundred thousand long-lived objects, and the
    collections their allocations trigger walked them again and again (py-spy, a warm clean of
    the reference workload: ~5% of its samples in the collector while numba loaded). The
    collector is on again right after (nothing is frozen: cycles made meanwhile are collected)."""
    global _loaded
    enabled = gc.isenabled()
    gc.disable()
    try:
        return kernel.dispatcher(*args)
    finally:
        _loaded = True
        if enabled:
            gc.enable()


def _count(work) -> None:
    global _python_work
    _python_work += work


def expect(work: int) -> None:
    """This process is about to walk ``work`` bytes through kernels (a clean of its dirty range):
    past the budget, every kernel goes to numba from its first call, instead of running the first
    budget's worth in Python (0.2-0.3 s of a one-shot clean of 600 MB) before numba loads anyway."""
    if _python_work + work > PYTHON_BUDGET:
        _count(PYTHON_BUDGET + 1)


# the kernels compiled ahead of time (compactlog/aot.py, built by `make venv`): used in mode auto
# unless COMPACTLOG_AOT=0 (tests comparing them with numba's)
_aot_wanted = _mode == "auto" and os.environ.get("COMPACTLOG_AOT", "1") != "0"
_aot_kernels = None          # "module:qualname" -> {argument types: function}, once loaded


def _array_key(a: np.ndarray):
    f = a.flags                       # numba's typeof: dtype, ndim, layout, writable (not alignment)
    layout = "C" if f.c_contiguous else "F" if f.f_contiguous else "A"
    return ("a", a.dtype.str, a.ndim, layout, f.writeable)


def _scalar_key(v):
    t = type(v)
    if t is int:                               # numba's typeof of a Python int
        return "int64" if -2**63 <= v < 2**63 else "uint64"
    if t is bool:
        return "bool"
    if t is float:
        return "float64"
    if v is None:
        return "none"
    if t is bytes:
        return "bytes"
    if isinstance(v, np.generic) and not isinstance(v, np.void):
        return v.dtype.name
    if t is tuple:
        return ("t",) + tuple(_array_key(x) if type(x) is np.ndarray else _scalar_key(x) for x in v)
    return ("?", t.__name__)                   # matches no exported signature


def typekey(args) -> tuple:
    """The argument types of a call as the ahead-of-time table keys them (numba's typeof, without
    numba: ``compactlog.aot.numba_key`` maps its types to the same keys)."""
    return tuple(_array_key(a) if type(a) is np.ndarray else _scalar_key(a) for a in args)


def host_cpu() -> str | None:
    """What the ahead-of-time build was compiled for (``target_cpu="host"``: this CPU's model and
    instruction-set extensions, from /proc/cpuinfo's first processor), None where it cannot be
    told. A venv copied to a machine without an extension the code uses would die of SIGILL; numba's
    own cache checks the same before it loads a kernel."""
    import hashlib
    wanted = ("vendor_id", "model name", "flags", "CPU implementer", "CPU architecture", "CPU part",
              "Features", "isa")
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read().split("\n\n", 1)[0]
    except OSError:
        return None
    lines = sorted(line.strip() for line in first.splitlines() if line.split(":", 1)[0].strip() in wanted)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest() if lines else None


def _load_aot() -> dict:
    """The ahead-of-time kernels by name; {} when there is no build, it is from other sources (a
    kernel module changed since), was compiled for another CPU, or its extension does not load."""
    import hashlib
    import json
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "_aot_kernels.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        cpu = host_cpu()
        if cpu is None or manifest.get("cpu") != cpu:
            return {}
        root = os.path.dirname(os.path.dirname(here))
        for path, digest in manifest["sources"].items():
            with open(os.path.join(root, *path.split("/")), "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != digest:
                    return {}
        ext = importlib.import_module(__package__ + "._aot_kernels")
        if ext.build_id() != manifest["build_id"]:
            return {}
    except (OSError, ValueError, KeyError, ImportError, AttributeError):
        return {}

    def key(k):
        return tuple(key(x) if isinstance(x, list) else x for x in k)
    return {name: {key(k): getattr(ext, symbol) for k, symbol in sigs}
            for name, sigs in manifest["kernels"].items()}


def _aot_table(kernel: Kernel) -> dict:
    if not aot_ready():
        return {}
    return _aot_kernels.get(f"{kernel.__module__}:{kernel.__qualname__}", {})


def aot_loaded() -> bool:
    """Whether this process runs kernels compiled ahead of time (``compactlog/aot.py``)."""
    return bool(_aot_kernels)


def _kernel_named(module: str, qualname: str) -> Kernel:
    return getattr(importlib.import_module(module), qualname)


def njit(fn=None, *, work=None, **options):
    """numba's ``njit`` (same options), returning a ``Kernel``; ``work(*args)`` (bytes a call
    walks) lets the kernel run in Python while the process's work is small."""
    def wrap(f):
        return Kernel(f, options, work)
    return wrap(fn) if fn is not None else wrap


class Intrinsic:
    """numba's ``@intrinsic`` (its typing function), with the plain-Python function a kernel
    running in Python calls instead."""

    def __init__(self, typer, python):
        self.typer = typer
        self.python = python
        self._numba = None
        self.__name__ = typer.__name__
        self.__module__ = typer.__module__

    def __call__(self, *args):
        return self.python(*args)

    def numba(self):
        if self._numba is None:
            from numba.extending import intrinsic
            self._numba = intrinsic(self.typer)
        return self._numba


def intrinsic(*, python):
    def wrap(typer):
        return Intrinsic(typer, python)
    return wrap


def _holds_kernels(module: pytypes.ModuleType) -> bool:
    return any(isinstance(v, (Kernel, Intrinsic)) for v in vars(module).values())


def _build(name: str) -> None:
    """Dispatchers for the kernels of module ``name`` and of every module they reach, published
    together once all are built: a thread never calls one whose namespace is half replaced."""
    global _compiled
    built: list[Kernel] = []
    _shadow(name, built)
    for kernel in built:
        kernel._dispatcher = kernel._building
    _compiled = True


def _shadow(name: str, built: list) -> pytypes.ModuleType:
    """The module ``name`` as numba sees it: its globals with kernels replaced by dispatchers.

    Building it gives every kernel of the module its dispatcher (cheap: numba compiles or loads
    from its cache on a kernel's first call)."""
    shadow = _shadows.get(name)
    if shadow is not None:
        return shadow
    import numba
    source = sys.modules[name]
    shadow = pytypes.ModuleType(name, source.__doc__)
    _shadows[name] = shadow                  # before filling: modules may refer to each other
    namespace = shadow.__dict__
    namespace.update(vars(source))
    package = __package__.split(".")[0] + "."
    for key, value in list(namespace.items()):     # this module's kernels first: a module that
        if isinstance(value, Kernel) and value.fn.__module__ == name:   # refers back finds them
            if value._building is None:
                f = value.fn
                twin = pytypes.FunctionType(f.__code__, namespace, f.__name__, f.__defaults__, f.__closure__)
                twin.__qualname__ = f.__qualname__
                twin.__doc__ = f.__doc__
                value._building = numba.njit(**value.options)(twin)
                built.append(value)
            namespace[key] = value._building
        elif isinstance(value, Intrinsic):
            namespace[key] = value.numba()
    for key, value in list(namespace.items()):
        if isinstance(value, Kernel):                                    # imported from another
            if value._building is None:
                _shadow(value.fn.__module__, built)
            namespace[key] = value._building
        elif isinstance(value, pytypes.ModuleType) and value.__name__.startswith(package) \
                and _holds_kernels(value):
            namespace[key] = _shadow(value.__name__, built)
    return shadow
