"""``consumer-groups``: kafka-consumer-groups.sh (Kafka's ``ConsumerGroupCommand``): the command.

``--list [--state [STATE,...]]``; ``--describe --group G... | --all-groups`` (the offsets view:
committed offset, log end offset and lag per partition with the member that owns it; ``--members
[--verbose]``; ``--state``); ``--reset-offsets --group G... | --all-groups`` with ``--topic
T[:P,...] | --all-topics`` and one of ``--to-earliest | --to-latest | --to-current | --to-offset N
| --shift-by N | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS | --from-file
CSV``, ``--dry-run | --execute`` and ``--export`` (the plan as CSV); ``--delete --group G... |
--all-groups``; ``--delete-offsets --group G --topic T[:P,...]``; with Kafka's output, messages
and option conflicts (usage errors exit with 2).

With ``--bootstrap-server HOST:PORT`` the command acts through a broker, as Kafka's tool does.
Without it, with ``--data-dir``, it reads ``__consumer_offsets`` and the logs of the data dir
directly (read-only, beside a running broker too); ``--execute``, ``--delete`` and
``--delete-offsets`` then write the offsets topic exactly as the broker's coordinator would, under
the data-dir lock, so they are refused while a broker runs on the dir (``backends``). The options
are read by ``options``, the actions run by ``service`` (plans made by ``reset_planner``, the
output written by ``printing``); all of them are imported when the command runs, not when the CLI
starts.
"""

from __future__ import annotations

import sys

import typer

from ..common import context, fail
from ..apps import app


# -- the command ------------------------------------------------------------------------------------

@app.command("consumer-groups", context_settings={"allow_extra_args": True})
def consumer_groups_cmd(
        ctx: typer.Context,
        bootstrap: str = typer.Option(None, "--bootstrap-server", help="HOST:PORT of a broker to act "
                                      "through; without it, --data-dir is read (and written) directly."),
        list_: bool = typer.Option(False, "--list", help="List all consumer groups."),
        describe: bool = typer.Option(False, "--describe", help="Describe groups: offsets and lag per "
                                      "partition (--members: their members, --state: their state)."),
        delete: bool = typer.Option(False, "--delete", help="Delete groups (they must have no members)."),
        reset: bool = typer.Option(False, "--reset-offsets", help="Reset groups' committed offsets "
                                   "(the groups must have no members)."),
        delete_offsets_: bool = typer.Option(False, "--delete-offsets", help="Delete a group's committed "
                                             "offsets of the --topic partitions."),
        groups: list[str] = typer.Option(None, "--group", help="A group (repeatable except for --delete-offsets)."),
        all_groups: bool = typer.Option(False, "--all-groups", help="Every group, for --describe, --delete "
                                        "and --reset-offsets."),
        topics: list[str] = typer.Option(None, "--topic", help="TOPIC or TOPIC:0,1,2 (repeatable)."),
        all_topics: bool = typer.Option(False, "--all-topics", help="Reset every partition the group has "
                                        "an offset for."),
        to_earliest: bool = typer.Option(False, "--to-earliest"),
        to_latest: bool = typer.Option(False, "--to-latest"),
        to_current: bool = typer.Option(False, "--to-current", help="The committed offset (the log end "
                                        "where there is none)."),
        to_offset: int = typer.Option(None, "--to-offset"),
        to_datetime: str = typer.Option(None, "--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]"),
        by_duration: str = typer.Option(None, "--by-duration", help="PnDTnHnMnS: the offset at that long "
                                        "before now."),
        from_file: str = typer.Option(None, "--from-file", help="CSV of topic,partition,offset (one "
                                      "--group) or group,topic,partition,offset lines."),
        shift_by: int = typer.Option(None, "--shift-by"),
        dry_run: bool = typer.Option(False, "--dry-run", help="Only show the new offsets (the default)."),
        execute: bool = typer.Option(False, "--execute", help="Write the new offsets."),
        export: bool = typer.Option(False, "--export", help="Print the new offsets as CSV (what --from-file "
                                    "reads) instead of the table."),
        members: bool = typer.Option(False, "--members"),
        offsets_: bool = typer.Option(False, "--offsets", help="The offsets view of --describe (the default)."),
        state: bool = typer.Option(False, "--state", help="With --describe: the groups' state. With --list: "
                                   "each group's state, optionally only groups in the states given "
                                   "(--state Stable,Empty)."),
        verbose: bool = typer.Option(False, "--verbose")):
    """Manage consumer groups, as kafka-consumer-groups.sh does."""
    # imported here: only this command needs them (and the backends' libraries, later still)
    from . import printing, service
    from .backends import BrokerBackend, DataDirBackend
    from .options import UsageError, check_args, parse_states, parse_topic_arg, read_reset_plan, reset_scenario
    groups = list(groups or [])
    topics = list(topics or [])
    # --state takes an optional value (Kafka's withOptionalArg), which the CLI parser cannot
    # express: a flag here, its value the one word left over
    extra = list(ctx.args)
    state_value = None
    if state and len(extra) == 1:
        state_value = extra.pop()
    if extra:
        fail(f"unexpected argument{'s' if len(extra) > 1 else ''}: {' '.join(extra)}", 2)
    has = {"list": list_, "describe": describe, "delete": delete, "reset-offsets": reset,
           "delete-offsets": delete_offsets_, "group": bool(groups), "all-groups": all_groups,
           "topic": bool(topics), "all-topics": all_topics, "dry-run": dry_run, "execute": execute,
           "export": export, "members": members, "offsets": offsets_, "state": state, "verbose": verbose,
           "to-offset": to_offset is not None, "to-datetime": to_datetime is not None,
           "by-duration": by_duration is not None, "to-earliest": to_earliest, "to-latest": to_latest,
           "to-current": to_current, "shift-by": shift_by is not None, "from-file": from_file is not None}
    try:
        check_args(has, state_value, len(groups))
        parsed_topics = [parse_topic_arg(t) for t in topics]
        states = parse_states(state_value) if list_ else None
    except UsageError as e:
        fail(str(e), 2)
    how, plan_file = None, None
    if reset:
        if not dry_run and not execute:
            sys.stderr.write("WARN: No action will be performed as the --execute option is missing; "
                             "add --dry-run to say so explicitly.\n")
        if from_file is not None:
            plan_file = read_reset_plan(from_file, groups)
        else:
            how = reset_scenario(to_earliest=to_earliest, to_latest=to_latest, to_current=to_current,
                                 to_offset=to_offset, shift_by=shift_by, to_datetime=to_datetime,
                                 by_duration=by_duration)
    writes = (reset and execute) or delete or delete_offsets_
    if bootstrap:
        backend = BrokerBackend(bootstrap)
        dd = None
    else:
        c = context(ctx)
        dd = c.open(write=writes)
        backend = DataDirBackend(dd)
    ok = True
    try:
        if all_groups and not list_:
            selected = [g for g, _ in sorted(backend.list_groups())]
        else:
            selected = groups
        if list_:
            service.list_groups(backend, state, states)
        elif describe:
            # Kafka collects the groups in a TreeMap: each once, in name order
            for g in sorted(set(selected)):
                if members:
                    service.describe_members(backend, g, verbose)
                elif state:
                    service.describe_state(backend, g, verbose)
                else:
                    service.describe_offsets(backend, g)
        elif reset:
            result = service.reset_offsets(backend, selected, parsed_topics, all_topics, how, plan_file, execute)
            if export:
                printing.out(printing.export_csv(result, with_group=len(groups) != 1))
            else:
                printing.print_reset(result)
        elif delete:
            ok = service.delete_groups(backend, selected)
        else:
            ok = service.delete_offsets(backend, groups[0], parsed_topics)
    finally:
        backend.close()
        if dd is not None:
            dd.close()
    if not ok:
        raise typer.Exit(1)
