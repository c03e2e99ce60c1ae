"""bench/report.py's machine facts: a fact of the node is printed once when every result agrees, and per result
(naming the ones that did not record it) when they differ."""
from __future__ import annotations

from bench.report import node_fact


def _doc(**cassandra: str) -> dict:
    return {"machine": {"cassandra": {"version": "5.0.7", **cassandra}}}


def test_a_fact_every_result_agrees_on_is_printed_once():
    docs = {"a": _doc(paxos_variant="v2"), "b": _doc(paxos_variant="v2"), "embedded": {"machine": {}}}
    assert node_fact(docs, "paxos_variant", "not recorded") == "v2"


def test_differing_facts_are_printed_per_result_with_the_missing_ones_named():
    docs = {"b": _doc(paxos_variant="v2"), "a": _doc()}
    assert node_fact(docs, "paxos_variant", "not recorded") == "a: not recorded, b: v2"


def test_no_result_on_a_node_prints_a_dash():
    assert node_fact({"embedded": {"machine": {}}}, "jit", "c1 (not recorded)") == "-"
