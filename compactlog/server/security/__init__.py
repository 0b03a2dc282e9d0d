"""The broker's security: listeners and their settings, TLS, SASL (PLAIN, SCRAM) and the SCRAM
credential store (security.md). The SASL exchange is sans-IO (``sasl.py``): the transport feeds it
requests and applies the steps it returns."""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401
