"""Kafka's ``ClassicGroupState``: the states of a classic group, under the names DescribeGroups
and ListGroups answer, and the states each may be entered from."""

from __future__ import annotations

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

# the states a group may come from
VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}
