"""The column output of ``consumer-groups`` on its own, and its error texts from one source (kio's
names, kafka-python's descriptions, Kafka's own wording where kafka-python paraphrases)."""

from __future__ import annotations

from types import SimpleNamespace

from compactlog.cli.consumer_groups import printing


def test_error_texts():
    assert printing.error_text(86) == ("GROUP_SUBSCRIBED_TO_TOPIC", "Deleting offsets of a topic is forbidden "
                                       "while the consumer group is actively subscribed to it.")
    assert printing.error_text(69) == ("GROUP_ID_NOT_FOUND", "The group id does not exist.")
    assert printing.error_text(3) == ("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition.")
    assert printing.error_name(6) == "NOT_LEADER_OR_FOLLOWER"          # Kafka's name, as kio has it


def test_group_list(capsys):
    printing.print_group_list([("a-long-group-name", "Stable"), ("b", "Empty")], with_state=True)
    assert capsys.readouterr().out == ("GROUP                       STATE\n"
                                       "a-long-group-name           Stable\n"
                                       "b                           Empty\n")
    printing.print_group_list([("a", "Stable")], with_state=False)
    assert capsys.readouterr().out == "a\n"


def test_offsets_view_with_lag_and_notes(capsys):
    rows = [(("t", 0), 3, "m-1", "/10.0.0.1", "cli"), (("t", 1), None, "-", "-", "-")]
    printing.print_offsets("g", "Empty", rows, {("t", 0): 10})
    captured = capsys.readouterr()
    assert captured.err == "\nConsumer group 'g' has no active members.\n"
    lines = captured.out.split("\n")
    assert lines[2].split() == ["g", "t", "0", "3", "10", "7", "m-1", "/10.0.0.1", "cli"]
    assert lines[3].split() == ["g", "t", "1", "-", "-", "-", "-", "-", "-"]
    printing.print_members("nope", SimpleNamespace(state="Dead", members=[]), verbose=False)
    assert capsys.readouterr().out == "\nError: Consumer group 'nope' does not exist.\n"


def test_offset_deletion(capsys):
    ok = printing.print_offset_deletion("g", 86, {("t", 0): 86, ("gone", -1): 3, ("t", 10): 0})
    out = capsys.readouterr().out.split("\n")
    assert not ok
    assert out[0:2] == ["", "Error: Encountered some partition-level error, see the follow-up details."]
    assert [line.split()[:3] for line in out[4:7]] == [["gone", "-", "Error:"], ["t", "0", "Error:"],
                                                       ["t", "10", "Successful"]]
    assert printing.print_group_deletion({"a": None, "b": "NON_EMPTY_GROUP"}) is False
    assert capsys.readouterr().out == ("\nError: Deletion of some consumer groups failed:\n"
                                       "* Group 'b' could not be deleted due to: NON_EMPTY_GROUP\n"
                                       "\nThese consumer groups were deleted successfully: 'a'\n")
