"""The kernels compiled ahead of time into an extension module: ``python -m compactlog.aot``.

A one-shot command that runs its kernels through numba pays for numba's import and its first
cached-code load (~0.6 CPU-s of a 2-3 CPU-s clean of the reference workload, issue 28), however
warm numba's cache is. ``make venv`` therefore also runs this module after the warm-up
(``warmup.py``; both sit at the top of the package, as they drive every floor's kernels): for
every kernel signature numba's cache holds (read from its index beside the sources: what the
warm-up compiled, and any other signature a run compiled since) it exports the kernel through
``numba.pycc`` into ``record/_aot_kernels.<abi>.so``, a plain CPython extension that needs numpy
but not numba, and writes ``record/_aot_kernels.json`` beside it (each kernel's signatures by
argument types, and a digest of every kernel module and of the package's modules they import).
Kafka has no counterpart (the JVM compiles as it runs).

``record/jit.py`` loads the two on a kernel's first call (mode ``auto``): a call whose argument
types match an exported signature runs the extension's code; any other call goes the old way
(plain Python while the work is small, then numba). The module is not used when any of those
sources changed since the build (the digests), nor under ``COMPACTLOG_KERNELS=jit|python`` or
``COMPACTLOG_AOT=0``. Kernels declared ``nogil=True`` are left to numba: the extension's wrappers
hold the GIL, and those kernels run in threads that must not.

The extension is built from the same function code numba compiles (the module shadows of
``jit.py``: callees, inlined helpers and intrinsics as in the JIT), for this machine's CPU, as the
JIT does. ``numba.pycc`` is deprecated in numba 0.6x but still shipped; if it goes, the build
fails, says so, and every command runs on numba as before.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import time

from .record import jit

NAME = "_aot_kernels"
PACKAGE_ROOT = os.path.dirname(os.path.abspath(__file__))
HERE = os.path.join(PACKAGE_ROOT, "record")     # beside jit.py, which loads it
MANIFEST = os.path.join(HERE, NAME + ".json")


def unusable_reason() -> str | None:
    """Why this checkout's ahead-of-time build cannot be used (None: it can)."""
    if not os.path.exists(MANIFEST):
        return "no ahead-of-time kernels: `python -m compactlog.aot` builds them"
    if not jit._load_aot():
        return ("the ahead-of-time build is stale (a digested source changed since, or another CPU): "
                "`python -m compactlog.aot` builds it again")
    return None


ROUTES = ("numba", "ahead-of-time")


def route_environment(route: str) -> dict[str, str]:
    """The environment a process needs to run its kernels by ``route`` (tests of both routes:
    numba's cache, or this build with numba's as the fallback)."""
    return {"COMPACTLOG_KERNELS": "auto", "COMPACTLOG_AOT": "0" if route == "numba" else "1"}


def kernel_modules() -> list[str]:
    """The package's modules that declare kernels (tests and the broker's server/ excluded: the
    server's kernels live in record/ and storage/)."""
    names = []
    for dirpath, dirnames, filenames in os.walk(PACKAGE_ROOT):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "server"))
        for f in sorted(filenames):
            if not f.endswith(".py") or f.endswith("_test.py"):
                continue
            path = os.path.join(dirpath, f)
            with open(path, encoding="utf-8") as fh:
                if "@njit" not in fh.read():
                    continue
            rel = os.path.relpath(path, os.path.dirname(PACKAGE_ROOT))[:-3]
            if rel.endswith("__init__"):
                continue
            names.append(rel.replace(os.sep, "."))
    return [n for n in names if n not in (__package__ + ".aot", "compactlog.aot", jit.__name__)]


def numba_key(t):
    """The key of numba type ``t`` that ``jit.typekey`` computes for a value of that type; None
    when no Python value maps to it (the signature is not exported)."""
    from numba import types
    from numba.np.numpy_support import as_dtype
    if isinstance(t, types.Literal):          # only a kernel calling another passes these
        return None
    if isinstance(t, types.Array):
        if isinstance(t.dtype, types.Record) or not t.aligned:     # typeof never gives these
            return None
        return ("a", as_dtype(t.dtype).str, t.ndim, t.layout, t.mutable)
    if isinstance(t, types.Bytes):
        return "bytes"
    if isinstance(t, types.NoneType):
        return "none"
    if isinstance(t, (types.UniTuple, types.Tuple)):
        inner = tuple(numba_key(x) for x in t.types)
        return None if None in inner else ("t",) + inner
    if isinstance(t, (types.Boolean, types.Integer, types.Float)):
        return str(t)
    return None


def _signatures(kernel) -> list:
    """The argument types numba's cache holds for ``kernel`` compiled by this codegen and bytecode
    (what the warm-up compiled)."""
    disp = kernel.dispatcher
    cache = getattr(disp, "_cache", None)
    if cache is None or not hasattr(cache, "_cache_file"):
        return []
    codegen = disp.targetctx.codegen()
    sigs = []
    for key in cache._cache_file._load_index():
        sig = key[0]
        if key == cache._index_key(sig, codegen):
            sigs.append(sig)
    return sorted(sigs, key=str)


def imported(modules) -> set:
    """``modules`` and the package's modules they import directly: a kernel's code holds the
    values of the globals it reads (constants from ``record/layout.py`` and the like) as they
    were when it was compiled, so a change there makes the build stale too."""
    import ast
    package = jit.__name__.split(".")[0]       # not __name__: this module runs as __main__
    out = set(modules)
    for m in modules:
        mod = sys.modules[m]
        with open(mod.__file__, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        base = m if mod.__file__.endswith("__init__.py") else m.rpartition(".")[0]
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom):
                target = importlib.util.resolve_name("." * node.level + (node.module or ""), base) \
                    if node.level else node.module
                names = [target] + [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name and name.split(".")[0] == package and name in sys.modules \
                        and getattr(sys.modules[name], "__file__", None):
                    out.add(name)
    return out


def sources(modules) -> dict:
    """{path relative to the package's parent: sha256 of the file} of ``modules``."""
    out = {}
    for m in sorted(modules):
        path = sys.modules[m].__file__
        with open(path, "rb") as f:
            out[os.path.relpath(path, os.path.dirname(PACKAGE_ROOT)).replace(os.sep, "/")] = \
                hashlib.sha256(f.read()).hexdigest()
    return out


def build(verbose: bool = False) -> dict:
    """Compile the extension and write the manifest (replacing both); the manifest."""
    from numba import types
    from numba.pycc import CC
    for name in kernel_modules():
        importlib.import_module(name)
    exports = []          # (symbol, function, signature, module, qualname, key)
    kernels = {}
    for name in kernel_modules():
        for attr, k in sorted(vars(sys.modules[name]).items()):
            if not isinstance(k, jit.Kernel) or k.fn.__module__ != name or k.options.get("nogil"):
                continue
            for sig in _signatures(k):
                key = tuple(numba_key(t) for t in sig)
                if None in key:
                    continue
                disp = k.dispatcher
                disp.compile(sig)                     # from the cache: its return type
                ret = disp.overloads[tuple(sig)].signature.return_type
                symbol = f"k{len(exports)}"
                exports.append((symbol, disp.py_func, ret(*sig), name, k.__qualname__, key))
                kernels.setdefault(f"{name}:{k.__qualname__}", []).append([list_key(key), symbol])
    build_id = int.from_bytes(os.urandom(6), "little")
    modules = imported(jit._shadows)       # every module the exported kernels reach, and theirs
    cc = CC(NAME, source_module=jit.__name__)
    cc.target_cpu = "host"                  # built where it runs, like numba's JIT
    cc.verbose = verbose
    for symbol, fn, sig, *_ in exports:
        cc.export(symbol, sig)(fn)

    def build_id_fn():
        return build_id
    cc.export("build_id", types.int64())(build_id_fn)
    with tempfile.TemporaryDirectory(prefix="compactlog-aot-", dir=HERE) as tmp:
        cc.output_dir = tmp
        cc.compile()
        built = os.path.join(tmp, cc._output_file)
        manifest = {"build_id": build_id, "sources": sources(modules), "cpu": jit.host_cpu(),
                    "extension": cc._output_file, "kernels": kernels}
        for f in os.listdir(HERE):          # an older build's extension (another ABI tag)
            if f.startswith(NAME + ".") and f.endswith((".so", ".pyd")):
                os.remove(os.path.join(HERE, f))
        os.replace(built, os.path.join(HERE, cc._output_file))
        with open(os.path.join(tmp, "m.json"), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        os.replace(os.path.join(tmp, "m.json"), MANIFEST)
    return manifest


def list_key(key):
    return [list_key(k) if isinstance(k, tuple) else k for k in key]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compactlog.aot", description=__doc__.split("\n")[0])
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    started = time.monotonic()
    if not args.quiet:
        print("compactlog: compiling the kernels ahead of time (numba.pycc) ...", file=sys.stderr)
    try:
        manifest = build(verbose=args.verbose)
    except Exception as e:                   # noqa: BLE001 - the JIT still works: say why, go on
        print(f"compactlog: the ahead-of-time kernels could not be built ({type(e).__name__}: {e}); "
              "commands will load numba's cached kernels instead", file=sys.stderr)
        return 1
    if not args.quiet:
        n = sum(len(v) for v in manifest["kernels"].values())
        print(f"compactlog: {n} kernel signatures of {len(manifest['kernels'])} kernels in "
              f"{manifest['extension']} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
