"""CRC-32C (Kafka's ``Crc32C``), from the ``crc32c`` package's C extension.

``import crc32c`` runs the package's ``__init__``, which looks its own version up in the installed
distributions' metadata (``importlib.metadata``): 0.05-0.07 CPU-s, a sixth of a small command's
whole run. The extension module is loaded here directly instead (the package's ``__init__`` is
not run); if that fails (another layout of the package) the package is imported as usual.
"""

from __future__ import annotations


def _extension():
    import importlib.machinery
    import importlib.util
    import sys
    try:
        spec = importlib.util.find_spec("crc32c")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", f"{folder}/_crc32c{suffix}")
                ext = importlib.util.spec_from_file_location("crc32c._crc32c", loader.path, loader=loader)
                try:
                    module = importlib.util.module_from_spec(ext)
                except (ImportError, OSError):
                    continue
                ext.loader.exec_module(module)
                sys.modules.setdefault("crc32c._crc32c", module)
                return module
    except (ImportError, ValueError, AttributeError):
        pass
    import crc32c as package
    return package


crc32c = _extension().crc32c
