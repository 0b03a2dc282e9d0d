"""The compactlog command line."""
