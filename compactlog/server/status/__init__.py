"""The broker's status page: ``status_data`` (the JSON document, ``/v1/status.json``) and
``render_status_page`` (one self-contained HTML page, ``/``, that fetches it and redraws)."""

from .data import status_data
from .page import render_status_page

__all__ = ["status_data", "render_status_page"]
