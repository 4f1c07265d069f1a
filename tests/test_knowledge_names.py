"""One normal form per entity name and per predicate: what the graph, conflicts and learn compare."""

import pytest

from knowledge.names import entity_name, predicate_name


@pytest.mark.parametrize(
    ("written", "normal"),
    [
        ("Payments API", "payments api"),
        ("  payments\tAPI ", "payments api"),
        ("the Payments API", "payments api"),
        ('"Payments API".', "payments api"),
        ("ＡＰＩ", "api"),
        ("The", "the"),
        ("Straße", "strasse"),
    ],
)
def test_entity_names_compare_by_one_normal_form(written, normal):
    assert entity_name(written) == normal


@pytest.mark.parametrize(
    ("written", "normal"),
    [
        ("Runs on", "runs on"),
        ("runs_on", "runs on"),
        ("is-owned-by", "is owned by"),
        ("  Depends   ON ", "depends on"),
    ],
)
def test_predicates_compare_by_one_normal_form(written, normal):
    assert predicate_name(written) == normal
