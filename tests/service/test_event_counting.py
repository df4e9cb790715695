"""Each event counted once, at its outcome, in metastore_events_total: refusals on the event routes
(before the route runs, in it, or the database's judgement) at their reason; refusals elsewhere
never."""

from __future__ import annotations

import gzip
import uuid

import httpx

from tests.support.checks import event, metric
from tests.support.servers import Server


def rejected(server: Server, reason: str | None = None) -> float:
    labels = {"outcome": "rejected"} if reason is None else {"outcome": "rejected", "reason": reason}
    return metric(server, "metastore_events_total", **labels)


def test_a_refusal_on_an_event_route_is_one_rejected_event_at_its_reason(server: Server, client: httpx.Client) -> None:
    before = {r: rejected(server, r) for r in ("415", "22P03", "22P02")}
    total = rejected(server)
    # Refused by the request middleware, before the route runs: not JSON.
    response = client.post("/api/v1/lineage", content=b"{}", headers={"content-type": "text/plain"})
    assert response.status_code == 415
    # Refused in the route, before the database: a body that is not the gzip it says.
    response = client.post(
        "/api/v1/lineage/batch",
        content=b"not gzip",
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == "22P03"
    # Judged by the database: once, though the answer is a refusal too.
    response = client.post("/api/v1/lineage", content=gzip.compress(b"{nope"), headers={"content-encoding": "gzip"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "22P02"
    assert {r: rejected(server, r) - before[r] for r in before} == {"415": 1, "22P03": 1, "22P02": 1}
    assert rejected(server) - total == 3


def test_a_refusal_elsewhere_is_no_event(server: Server, client: httpx.Client) -> None:
    total = rejected(server)
    assert client.get("/api/v1/datasets", params={"limit": "many"}).status_code == 400
    assert client.get("/api/v1/datasets", params={"q": "a\x00b"}).status_code == 400
    stored = metric(server, "metastore_events_total", outcome="stored")
    assert client.post("/api/v1/lineage", json=event(uuid.uuid4().hex[:8], 1)).status_code == 201
    assert metric(server, "metastore_events_total", outcome="stored") - stored == 1
    assert rejected(server) == total
