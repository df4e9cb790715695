"""metastore.list_namespaces: every namespace of datasets and jobs, with how many of each."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import ingest
from tests.support.events import run_event
from tests.support.rows import value


def namespaces(conn: psycopg.Connection[Any], limit: int = 1000) -> Any:
    return value(conn, "SELECT metastore.list_namespaces(%s::int)", (limit,))


def test_counts_of_datasets_and_jobs_in_code_point_order(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    long = "hdfs://nn/" + "p" * 1100  # past the order index's 1024-byte prefix
    ingest(
        service,
        run_event(
            "r1",
            job="j1",
            namespace="trino://t:8080",
            inputs=["a", "b"],
            outputs=["c"],
            dataset_namespace="trino://t:8080",
        ),
    )
    ingest(
        service,
        run_event(
            "r2", job="j2", namespace="trino://t:8080", inputs=["a"], outputs=[], dataset_namespace="s3://bucket"
        ),
    )
    ingest(service, run_event("r3", job="load", namespace="airflow", inputs=["x"], outputs=[], dataset_namespace=long))
    ingest(service, run_event("r4", job="load", namespace=long + "p", inputs=[], outputs=[]))
    ingest(service, run_event("r5", job="Über", namespace="Zürich", inputs=[], outputs=[]))
    got = namespaces(service)
    assert got["truncated"] is False
    assert [(n["namespace"], n["datasets"], n["jobs"]) for n in got["namespaces"]] == [
        ("Zürich", 0, 1),
        ("airflow", 0, 1),
        (long, 1, 0),
        (long + "p", 0, 1),
        ("s3://bucket", 1, 0),
        ("trino://t:8080", 3, 2),
    ]
    cut = namespaces(service, 2)
    assert [n["namespace"] for n in cut["namespaces"]] == ["Zürich", "airflow"] and cut["truncated"] is True
    # What the owner hid is not counted; a namespace hidden is not listed.
    owner.execute("SELECT metastore.hide('dataset', 'trino://t:8080', 'a')")
    owner.execute("SELECT metastore.hide('job', 'trino://t:8080', 'j1')")
    owner.execute("SELECT metastore.hide('namespace', 'airflow')")
    got = {n["namespace"]: (n["datasets"], n["jobs"]) for n in namespaces(service)["namespaces"]}
    assert got["trino://t:8080"] == (2, 1) and "airflow" not in got


@pytest.mark.parametrize("limit", [0, 1001, None])
def test_bad_limits_are_22023(service: psycopg.Connection[Any], limit: int | None) -> None:
    with pytest.raises(psycopg.Error) as caught:
        namespaces(service, limit)  # type: ignore[arg-type]
    assert caught.value.sqlstate == "22023"
