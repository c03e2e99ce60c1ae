"""``spark/connect.py``'s pure part: the Connect URL of a session (no Spark needed)."""
from __future__ import annotations

import pytest

from airflow_atlas.spark.connect import session_url


def test_a_session_url_sets_the_session_id_and_keeps_the_other_parameters():
    assert session_url("sc://h:15002", "s1") == "sc://h:15002/;session_id=s1"
    assert session_url("sc://h:15002/;user_id=u;session_id=old", "s2") == "sc://h:15002/;user_id=u;session_id=s2"


def test_a_session_url_needs_a_connect_url():
    with pytest.raises(ValueError, match="sc://"):
        session_url("http://h:15002", "s1")
