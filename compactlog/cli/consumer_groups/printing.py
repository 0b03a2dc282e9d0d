"""What ``consumer-groups`` prints, column for column as Kafka's ``ConsumerGroupService`` does: the
group list, the offsets / members / state views of ``--describe`` with the notes printed before
them, the reset plan (a table, or CSV for ``--export``), and the outcome of ``--delete`` and
``--delete-offsets``. Errors are named from kio's ``ErrorCode`` and described from kafka-python's
error classes, both imported only when an error is printed.
"""

from __future__ import annotations

import csv
import io
import sys

MISSING = "-"

# Kafka's own wording (its Errors enum, which its tool prints) where kafka-python's description of
# the same code is a paraphrase: the output stays the tool's
_KAFKA_WORDING = {
    3: "This server does not host this topic-partition.",
    14: "The coordinator is loading and hence can't process requests.",
    15: "The coordinator is not available.",
    16: "This is not the correct coordinator.",
    24: "The configured groupId is invalid.",
    29: "Topic authorization failed.",
    30: "Group authorization failed.",
}


def error_name(code: int) -> str:
    """Kafka's name of an error code (kio's ``ErrorCode``, upper case)."""
    from kio.schema.errors import ErrorCode
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        from kafka.errors import for_code
        return for_code(code).message


def error_text(code: int) -> tuple[str, str]:
    """(Kafka's name of an error code, its message)."""
    if code in _KAFKA_WORDING:
        return error_name(code), _KAFKA_WORDING[code]
    from kafka.errors import for_code
    return error_name(code), for_code(code).description


def out(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(text + end)


def print_error(msg: str) -> None:
    """ConsumerGroupCommand.printError: on stdout, after an empty line."""
    out(f"\nError: {msg}")


def pad(values, widths) -> str:
    return " ".join(f"{v:<{w}}" for v, w in zip(values, widths))


def dash(v) -> str:
    return MISSING if v is None else str(v)


def state_says_print(group: str, state: str, rows: int | None) -> bool:
    """shouldPrintMemberState: the notes Kafka prints before a group's table."""
    if rows is None or state == "Dead":
        print_error(f"Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        sys.stderr.write(f"\nConsumer group '{group}' has no active members.\n")
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        sys.stderr.write(f"\nWarning: Consumer group '{group}' is rebalancing.\n")
    return rows > 0


# -- --list ------------------------------------------------------------------------------------------

def print_group_list(groups: list, with_state: bool) -> None:
    """listGroups: the ids, or with --state a GROUP / STATE table; ``groups`` [(id, state)] in order."""
    if not with_state:
        for g, _ in groups:
            out(g)
        return
    width = max([15] + [len(g) for g, _ in groups]) + 10
    out(pad(("GROUP", "STATE"), (width, 20)).rstrip())
    for g, s in groups:
        out(pad((g, s), (width, 20)).rstrip())


# -- --describe ----------------------------------------------------------------------------------------

def print_offsets(group: str, state: str, rows: list, ends: dict) -> None:
    """The offsets view: ``rows`` [((topic, partition), committed or None, consumer id, host,
    client id)], ``ends`` the log end offsets; the lag is their difference."""
    if not state_says_print(group, state, len(rows)):
        return
    table = []
    for (t, p), offset, cid, host, client in rows:
        end = ends.get((t, p))
        lag = end - offset if offset is not None and end is not None else None
        table.append((group, t, str(p), dash(offset), dash(end), dash(lag), cid, host, client))
    widths = [max([15] + [len(r[0]) for r in table]), max([15] + [len(r[1]) for r in table]), 10, 15, 15, 15,
              max([15] + [len(r[6]) for r in table]), max([15] + [len(r[7]) for r in table]), 0]
    out()
    out(pad(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
             "HOST", "CLIENT-ID"), widths).rstrip())
    for r in table:
        out(pad(r, widths).rstrip())
    out()


def _partitions_text(tps) -> str:
    by_topic: dict = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(str(p))
    return ", ".join(f"{t}({','.join(ps)})" for t, ps in by_topic.items()) or MISSING


def _epoch(v) -> str:
    return MISSING if v is None else str(v)


def print_members(group: str, info, verbose: bool) -> None:
    """The --members view of ``info`` (a backend's GroupInfo); --verbose adds the assignment, and
    for a KIP-848 group (Kafka 4's ConsumerGroupCommand) the member's epoch and assignment and the
    target assignment with its epoch."""
    if not state_says_print(group, info.state, None if info.state == "Dead" else len(info.members)):
        return
    consumer = getattr(info, "group_type", "classic") == "consumer"
    with_instance = any(m.instance_id for m in info.members)
    extra = (["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"] if consumer
             else ["ASSIGNMENT"]) if verbose else []
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"] + extra
    rows = []
    for m in info.members:
        row = [group, m.consumer_id] + ([m.instance_id or ""] if with_instance else []) + \
            [m.host, m.client_id, str(len(m.partitions))]
        if verbose and consumer:
            row += [_epoch(m.member_epoch), _partitions_text(m.partitions), _epoch(info.assignment_epoch),
                    _partitions_text(m.target or [])]
        elif verbose:
            row.append(_partitions_text(m.partitions))
        rows.append(row)
    minimum = {"GROUP-INSTANCE-ID": 17, "#PARTITIONS": 15, "ASSIGNMENT": 0, "CURRENT-EPOCH": 15,
               "TARGET-EPOCH": 15, "TARGET-ASSIGNMENT": 0}
    widths = [minimum[h] if h in ("#PARTITIONS", "ASSIGNMENT", "TARGET-ASSIGNMENT")
              else max([minimum.get(h, 15)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    out()
    out(pad(header, widths).rstrip())
    for r in rows:
        out(pad(r, widths).rstrip())
    out()


def print_state(group: str, info, verbose: bool = False) -> None:
    """The --state view of ``info`` (a backend's GroupInfo); --verbose adds a KIP-848 group's epoch
    and its target assignment's epoch."""
    if not state_says_print(group, info.state, None if info.state == "Dead" else 1):
        return
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [group, info.coordinator, info.assignor, info.state, str(len(info.members))]
    widths = [max(15, len(group)), 25, 20, 15, 0]
    if verbose and getattr(info, "group_type", "classic") == "consumer":
        header[4:4] = ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row[4:4] = [_epoch(info.group_epoch), _epoch(info.assignment_epoch)]
        widths[4:4] = [15, 25]
    out()
    out(pad(header, widths).rstrip())
    out(pad(row, widths).rstrip())
    out()


# -- --reset-offsets -------------------------------------------------------------------------------------

def print_reset(result: dict) -> None:
    """printOffsetsToReset: one table for every group (the header once any group was asked for)."""
    widths = [30, 30, 10, 15]
    if result:
        out()
        out(pad(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), widths).rstrip())
        for g in sorted(result):
            for (t, p), o in sorted(result[g].items()):
                out(pad((g, t, str(p), str(o)), widths).rstrip())
    out()


def export_csv(result: dict, with_group: bool) -> str:
    """exportOffsetsToCsv: ``topic,partition,offset`` lines when one --group was given, else
    ``group,topic,partition,offset`` (the format --from-file reads back)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for g in sorted(result):
        for (t, p), o in sorted(result[g].items()):
            w.writerow(([g] if with_group else []) + [t, p, o])
    return buf.getvalue()


# -- --delete / --delete-offsets ---------------------------------------------------------------------------

def print_group_deletion(results: dict) -> bool:
    """{group: None when deleted, else what failed}; True when every group went."""
    failed = {g: e for g, e in results.items() if e is not None}
    done = [g for g, e in results.items() if e is None]
    if not failed:
        out(f"Deletion of requested consumer groups ({', '.join(_quoted(g) for g in done)}) was successful.")
        return True
    print_error("Deletion of some consumer groups failed:")
    for g, e in failed.items():
        out(f"* Group '{g}' could not be deleted due to: {e}")
    if done:
        out(f"\nThese consumer groups were deleted successfully: {', '.join(_quoted(g) for g in done)}")
    return False


def _quoted(name: str) -> str:
    return f"'{name}'"


def print_offset_deletion(group: str, top: int, results: dict) -> bool:
    """The request's outcome (``top``: its error code), then one row per partition of ``results``
    {(topic, partition or -1): error code}; True when nothing failed."""
    name, message = error_text(top) if top else ("NONE", "")
    if top == 0:
        out(f"Request succeeded for deleting offsets from group {group}.")
    elif name in ("INVALID_GROUP_ID", "GROUP_ID_NOT_FOUND", "GROUP_AUTHORIZATION_FAILED", "NON_EMPTY_GROUP"):
        print_error(message)
    elif name in ("GROUP_SUBSCRIBED_TO_TOPIC", "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PARTITION"):
        print_error("Encountered some partition-level error, see the follow-up details.")
    else:
        print_error(f"Encountered some unknown error: {name}")
    width = max([15] + [len(t) for t, _ in results])
    out()
    out(pad(("TOPIC", "PARTITION", "STATUS"), (width, 10, 15)).rstrip())
    # Kafka sorts on the topic and the partition number glued together, as text
    for (t, p), code in sorted(results.items(), key=lambda kv: f"{kv[0][0]}{kv[0][1]}"):
        status = "Successful" if code == 0 else "Error: {}: {}".format(*error_text(code))
        out(pad((t, str(p) if p >= 0 else MISSING, status), (width, 10, 15)).rstrip())
    return top == 0 and not any(results.values())
