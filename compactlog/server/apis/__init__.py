"""The broker's APIs, one module per API or tight family (Redpanda's ``kafka/server/handlers/``).

Each module declares its API once, as an ``handler.ApiHandler``: key, name, versions, where it
runs, the handler and the error response. ``server/dispatch.py`` collects the declarations into
the dispatch table and the ApiVersions answer. Nothing here is imported by the transport.
"""
