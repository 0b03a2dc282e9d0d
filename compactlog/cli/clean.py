"""(placeholder, filled in by its own commit)"""
