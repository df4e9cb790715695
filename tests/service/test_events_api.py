"""GET /api/v1/events over TLS through the real server: JSON pages, NDJSON streams, filters, and a
reader streaming without pause while 8 clients post."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import Database
from tests.support.events import run_event
from tests.support.servers import Server

NDJSON = {"Accept": "application/x-ndjson"}


def make_event(tag: str, i: int, **extra: Any) -> dict[str, Any]:
    datasets = {
        "inputs": [f"cat.sch.t{i % 4}"],
        "outputs": [{"namespace": f"s3://{tag}", "name": f"out/{i}", "facets": {"x": {"é": [1, 2.50, None]}}}],
    }
    return run_event(
        job=f"job-{i}",
        namespace=f"feed-{tag}",
        event_time=f"2024-06-0{1 + i % 3}T12:00:00.{i:06d}Z",
        event_type="COMPLETE" if i % 2 else "START",
        dataset_namespace=f"trino://{tag}:8080",
        **{**datasets, **extra},
    )


def post_all(client: httpx.Client, events: list[dict[str, Any]]) -> list[int]:
    ids = []
    for event in events:
        response = client.post("/api/v1/lineage", json=event)
        assert response.status_code == 201, response.text
        ids.append(response.json()["event_id"])
    return ids


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-ndjson"
    return [json.loads(line) for line in response.text.splitlines()]


def test_json_pages_and_the_ndjson_stream_give_the_events_as_stored(client: httpx.Client, module_db: Database) -> None:
    tag = uuid.uuid4().hex[:8]
    sent = [make_event(tag, i) for i in range(7)]
    ids = post_all(client, sent)
    params = {"job_namespace": f"feed-{tag}"}

    got, cursor = [], None
    while True:
        response = client.get("/api/v1/events", params={**params, "limit": 3, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        body = response.json()
        assert set(body) == {"events", "next_cursor", "has_more"}
        got += body["events"]
        cursor = body["next_cursor"]
        if not body["has_more"]:
            break
    assert [e["id"] for e in got] == ids
    assert [e["event"] for e in got] == sent
    assert got[0]["source_kind"] == "unauthenticated" and got[0]["source_principal"] is None
    assert got[-1]["cursor"] == cursor

    streamed = client.get("/api/v1/events", params=params, headers=NDJSON)
    assert lines(streamed) == got
    # Byte for byte the jsonb PostgreSQL stored, rendered by PostgreSQL.
    with psycopg.connect(module_db.owner_dsn) as conn:
        stored = [
            r[0]
            for r in conn.execute("SELECT payload::text FROM metastore.events WHERE id = ANY(%s) ORDER BY id", (ids,))
        ]
    for line, payload in zip(streamed.text.splitlines(), stored, strict=True):
        assert f'"event": {payload}, ' in line

    # A stream resumes after a cursor and stops at its limit.
    resumed = lines(
        client.get("/api/v1/events", params={**params, "cursor": got[1]["cursor"], "limit": 3}, headers=NDJSON)
    )
    assert [e["id"] for e in resumed] == ids[2:5]


def test_filters_over_http(client: httpx.Client) -> None:
    tag = uuid.uuid4().hex[:8]
    ids = post_all(client, [make_event(tag, i) for i in range(8)])

    def ids_for(**params: str) -> list[int]:
        return [e["id"] for e in lines(client.get("/api/v1/events", params=params, headers=NDJSON))]

    assert ids_for(dataset_namespace=f"trino://{tag}:8080", dataset_name="cat.sch.t1") == [ids[1], ids[5]]
    assert ids_for(dataset_namespace=f"s3://{tag}", dataset_name="out/3") == [ids[3]]
    assert ids_for(job_namespace=f"feed-{tag}", job_name="job-6") == [ids[6]]
    assert ids_for(job_namespace=f"feed-{tag}", event_type="START") == ids[0::2]
    assert ids_for(job_namespace=f"feed-{tag}", event_time_from="2024-06-02", event_time_to="2024-06-03") == [
        ids[1],
        ids[4],
        ids[7],
    ]
    assert ids_for(job_namespace=f"feed-{tag}", received_to="2000-01-01T00:00:00Z") == []


@pytest.mark.parametrize(
    ("params", "headers", "status", "code"),
    [
        ({"cursor": "bm90IGEgY3Vyc29y"}, {}, 400, "22023"),
        ({"cursor": "bm90IGEgY3Vyc29y"}, NDJSON, 400, "22023"),
        ({"limit": "0"}, {}, 400, "22023"),
        ({"limit": "1001"}, {}, 400, "22023"),
        ({"limit": "0"}, NDJSON, 400, "22023"),
        ({"limit": "many"}, {}, 400, None),
        ({"event_time_from": "soon"}, {}, 400, "22007"),
        ({"received_from": "2024-02-30"}, NDJSON, 400, "22008"),
        ({"job_name": "a\x00b"}, {}, 400, "22021"),
    ],
)
def test_bad_requests_are_4xx_with_the_sqlstate(
    client: httpx.Client, params: dict[str, str], headers: dict[str, str], status: int, code: str | None
) -> None:
    response = client.get("/api/v1/events", params=params, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["status"] == status and error.get("code") == code


def test_a_reader_streaming_under_8_posting_clients_gets_every_event_once(server: Server, module_db: Database) -> None:
    """8 clients post over TLS while a reader streams NDJSON from its cursor without pause; the union
    of the streams equals exactly the stored events (no skip, no repeat)."""
    writers, per_writer = 8, 60
    tag = uuid.uuid4().hex[:8]
    stop = threading.Event()
    errors: list[BaseException] = []
    seen: list[int] = []
    read_while_writing: list[int] = []

    def write(w: int) -> None:
        try:
            with server.client() as c:
                post_all(c, [make_event(tag, w * 1000 + i) for i in range(per_writer)])
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            with server.client() as c:
                cursor = None
                while True:
                    done = stop.is_set()
                    params = {"cursor": cursor} if cursor else {}
                    with c.stream("GET", "/api/v1/events", params=params, headers=NDJSON) as response:
                        assert response.status_code == 200
                        for line in response.iter_lines():
                            event = json.loads(line)
                            assert "error" not in event, event
                            seen.append(event["id"])
                            cursor = event["cursor"]
                    if done:
                        return
                    if not read_while_writing and seen:
                        read_while_writing.append(len(seen))
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    started = time.monotonic()
    reader.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    reader.join(60)
    assert errors == []
    with psycopg.connect(module_db.owner_dsn) as conn:
        stored = [r[0] for r in conn.execute("SELECT id FROM metastore.events")]
    assert read_while_writing, "the reader must stream while the clients post"
    assert len(seen) == len(set(seen)), "an event was streamed twice"
    assert sorted(seen) == sorted(stored), f"{len(set(stored) - set(seen))} events were skipped"
    print(
        f"\n{writers * per_writer} events posted by {writers} clients in {time.monotonic() - started:.1f} s; "
        f"{len(seen)} streamed, none skipped or repeated"
    )
