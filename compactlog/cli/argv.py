"""Global options anywhere on the command line: ``compactlog consume --data-dir D --topic t`` is
read as ``compactlog --data-dir D consume --topic t``.

click only takes a group's options before the subcommand; Kafka's tools and kcat take every option
in any order, and a user who copies a command and adds ``--data-dir`` at the end should not get
"No such option". So before click parses, the global options (``--data-dir``, ``--override``,
``--verbose``/``-v``) found after the subcommand are moved in front of it, unless the subcommand
has an option of that name itself (``produce --verbose`` stays produce's). Option values are
skipped by the subcommand's own declarations, so a value that happens to look like a global
option is never moved; nothing after ``--`` is touched.
"""

from __future__ import annotations

# the root's options that may follow the subcommand: name -> whether it takes a value
GLOBAL_OPTIONS = {"--data-dir": True, "--override": True, "--verbose": False, "-v": False}


def _declared(command) -> dict[str, bool]:
    """A click command's option names -> whether each takes a value."""
    out: dict[str, bool] = {}
    for param in getattr(command, "params", ()):
        if getattr(param, "param_type_name", "") != "option":
            continue
        takes_value = not (getattr(param, "is_flag", False) or getattr(param, "count", False))
        for name in list(param.opts) + list(param.secondary_opts):
            out[name] = takes_value
    return out


def _skip_options(args: list[str], i: int, declared: dict[str, bool]) -> int:
    """The index of the first argument at or after ``i`` that is not one of ``declared``'s
    options or their values."""
    while i < len(args):
        a = args[i]
        if a == "--" or not a.startswith("-") or a == "-":
            return i
        name, eq, _ = a.partition("=")
        i += 1
        if declared.get(name) and not eq:
            i += 1
    return i


def hoist_global_options(root, args: list[str]) -> list[str]:
    """``args`` with the global options that follow the subcommand moved before it."""
    i = _skip_options(args, 0, _declared(root))
    insert_at = i
    command = root
    shadowed: set[str] = set()
    while i < len(args) and hasattr(command, "commands") and args[i] in command.commands:
        command = command.commands[args[i]]
        declared = _declared(command)
        shadowed |= set(declared)
        i = _skip_options(args, i + 1, declared) if hasattr(command, "commands") else i + 1
    if command is root:
        return list(args)
    declared = _declared(command)
    kept, moved = list(args[:i]), []
    while i < len(args):
        a = args[i]
        if a == "--":
            kept.extend(args[i:])
            break
        name, eq, _ = a.partition("=")
        if a.startswith("-") and name in declared:
            kept.append(a)
            if declared[name] and not eq and i + 1 < len(args):
                kept.append(args[i + 1])
                i += 1
        elif name in GLOBAL_OPTIONS and name not in shadowed:
            moved.append(a)
            if GLOBAL_OPTIONS[name] and not eq and i + 1 < len(args):
                moved.append(args[i + 1])
                i += 1
        else:
            kept.append(a)
        i += 1
    if not moved:
        return list(args)
    return kept[:insert_at] + moved + kept[insert_at:]


def through_broker(root, args: list[str], bootstrap: str) -> str | None:
    """The command line ``args`` (global options moved first) as it runs through a broker:
    ``compactlog produce --bootstrap-server B --topic t``; None when no command on its path has
    ``--bootstrap-server``."""
    import shlex
    i = _skip_options(args, 0, _declared(root))
    command, words, at = root, ["compactlog"], None
    while i < len(args) and hasattr(command, "commands") and args[i] in command.commands:
        command = command.commands[args[i]]
        words.append(args[i])
        start = i + 1
        i = _skip_options(args, start, _declared(command)) if hasattr(command, "commands") else start
        if "--bootstrap-server" in _declared(command):
            at = len(words)
        words.extend(args[start:i])
    if at is None:
        return None
    words.insert(at, f"--bootstrap-server {shlex.quote(bootstrap)}")
    return " ".join(words[:1] + words[1:]) + ("" if i >= len(args) else " " + shlex.join(args[i:]))
