"""Events sent by the real openlineage-python client, over HTTPS, land in the store."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    JobEvent,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import symlinks_dataset
from openlineage.client.transport.http import HttpConfig, HttpTransport

from tests.conftest import Database
from tests.support.servers import Server

PRODUCER = "https://example.com/metastore-tests"


@pytest.fixture(params=[None, "gzip"], ids=["plain", "gzip"])
def ol_client(request: pytest.FixtureRequest, server: Server) -> OpenLineageClient:
    config: dict[str, Any] = {
        "url": server.url,
        "sslContext": {"caCertPath": str(server.ca)},
        "auth": {"type": "api_key", "apiKey": "ignored"},
    }
    if request.param:
        config["compression"] = request.param
    return OpenLineageClient(transport=HttpTransport(HttpConfig.from_dict(config)))


def test_run_job_and_dataset_events_from_the_client(
    ol_client: OpenLineageClient, client: httpx.Client, module_db: Database
) -> None:
    tag = uuid.uuid4().hex[:8]
    namespace = f"postgres://db-{tag}:5432"
    now = datetime.now(UTC).isoformat()
    run, job = Run(runId=str(uuid.uuid4())), Job(namespace="ol-client", name=f"job-{tag}")
    table = OutputDataset(
        namespace=f"hdfs://nn-{tag}",
        name="/warehouse/orders",
        facets={
            "symlinks": symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[
                    symlinks_dataset.Identifier(namespace=f"hive://meta-{tag}:9083", name="sales.orders", type="TABLE")
                ]
            )
        },
    )
    ol_client.emit(RunEvent(eventType=RunState.START, eventTime=now, run=run, job=job, producer=PRODUCER))
    ol_client.emit(
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime=now,
            run=run,
            job=job,
            producer=PRODUCER,
            inputs=[InputDataset(namespace=namespace, name="shop.public.orders")],
            outputs=[table],
        )
    )
    ol_client.emit(
        JobEvent(
            eventTime=now,
            job=job,
            producer=PRODUCER,
            inputs=[InputDataset(namespace=namespace, name="shop.public.customers")],
        )
    )
    ol_client.emit(
        DatasetEvent(
            eventTime=now, producer=PRODUCER, dataset=StaticDataset(namespace=namespace, name="shop.public.static")
        )
    )

    with psycopg.connect(module_db.owner_dsn) as conn:
        kinds = conn.execute(
            "SELECT event_kind, event_type FROM metastore.events WHERE job_name = %s OR "
            "payload #>> '{dataset,name}' = 'shop.public.static' AND payload #>> '{dataset,namespace}' = %s "
            "ORDER BY id",
            (f"job-{tag}", namespace),
        ).fetchall()
    assert kinds == [("run", "START"), ("run", "COMPLETE"), ("job", None), ("dataset", None)]
    listed = client.get("/api/v1/datasets", params={"namespace": namespace}).json()["datasets"]
    assert [d["name"] for d in listed] == ["shop.public.customers", "shop.public.orders", "shop.public.static"]
    alias = client.get("/api/v1/datasets", params={"namespace": f"hive://meta-{tag}:9083"}).json()["datasets"]
    assert [(d["name"], d["kind"]) for d in alias] == [("sales.orders", "symlink")]
