"""On Citus the event feed refuses (0A000) rather than skip events. Over HTTP that refusal is an
answer the operator can act on: 501 with the SQLSTATE and the function's words, not a 500 that
says to retry. The rest of the API answers from the same service."""

from __future__ import annotations

from tests.conftest import Database
from tests.support.checks import event
from tests.support.service_fixtures import Serve


def test_the_feed_answers_501_and_says_why_where_the_events_are_distributed(database: Database, serve: Serve) -> None:
    server = serve()
    with server.client() as http:
        assert http.post("/api/v1/lineage", json=event("citus-feed", 1)).status_code == 201
        for path in ("/api/v1/events", "/api/v1/events?cursor=MTox&limit=5"):
            response = http.get(path)
            assert response.status_code == 501, response.text
            error = response.json()["error"]
            assert error["code"] == "0A000"
            assert "Citus" in error["message"] and "docs/scale.md" in error["message"]
        # Ingest and the read API are unaffected.
        assert http.get("/api/v1/datasets").status_code == 200
