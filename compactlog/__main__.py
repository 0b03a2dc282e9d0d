"""``python -m compactlog``: the compactlog command."""

from .cli.main import run

if __name__ == "__main__":
    run()
