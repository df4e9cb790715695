"""metastore.roll_up_datasets: the activity events append to existing datasets, folded in."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.conftest import ingest
from tests.support.events import symlinked

VIEW = "SELECT name, kind, first_seen, last_seen, input_events, output_events FROM metastore.datasets_view ORDER BY 1"
TABLE = VIEW.replace("datasets_view", "datasets")


def test_events_sharing_a_dataset_add_activity_and_a_roll_up_changes_nothing_readers_see(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    for i in range(200):
        event = {
            "eventTime": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
            "run": {"runId": f"r{i}"},
            "job": {"namespace": "j", "name": "n"},
            "inputs": [{"namespace": "s3://b", "name": "shared"}],
            "outputs": [{"namespace": "s3://b", "name": f"out{i % 3}"}],
        }
        assert ingest(service, event)[0] == "stored"
    # A symlink first, then the dataset itself: the kind follows at once.
    link = symlinked("s3://b", "t", "hive://m", "late")
    base = {"eventTime": "2024-01-01T01:00:00Z", "job": {"namespace": "j", "name": "n"}}
    assert ingest(service, {**base, "run": {"runId": "s1"}, "inputs": [link]})[0] == "stored"
    late = {"namespace": "hive://m", "name": "late"}
    assert ingest(service, {**base, "run": {"runId": "s2"}, "inputs": [late]})[0] == "stored"

    before = owner.execute(VIEW).fetchall()
    first, last = datetime(2024, 1, 1, 0, 0, 0, tzinfo=UTC), datetime(2024, 1, 1, 0, 3, 19, tzinfo=UTC)
    assert [r for r in before if r[0] == "shared"] == [("shared", "dataset", first, last, 200, 0)]
    assert [r[1] for r in before if r[0] == "late"] == ["dataset"]
    assert [r[4:] for r in before if r[0].startswith("out")] == [(0, 67), (0, 67), (0, 66)]
    pending = owner.execute("SELECT count(*) FROM metastore.dataset_activity").fetchone()
    assert pending is not None and pending[0] > 0  # ~1 in 64 events folds its datasets in

    folded = owner.execute("SELECT metastore.roll_up_datasets()").fetchone()
    assert folded == pending
    assert owner.execute("SELECT count(*) FROM metastore.dataset_activity").fetchone() == (0,)
    assert owner.execute(VIEW).fetchall() == before == owner.execute(TABLE).fetchall()


def test_the_app_role_cannot_roll_up(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        service.execute("SELECT metastore.roll_up_datasets()")
