"""metastore export | import | replay at their bounds: hostile servers (a real HTTP server in the
test: lines that never end, huge error bodies, streams that trickle or never stop, answers that are
not the feed), real gzip files (a 1 GiB line in 1 MB, bad lines, a broken file), and real stores
holding events nested 10 000 deep or printing to 18.6 MB. Each failure is one line and an exit
code, never a traceback; memory stays bounded whatever the input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from metastore import transfer
from tests.conftest import Database, create_database, drop_database
from tests.service.receivers import Got, Receiver, Reply, endless, trickle
from tests.support.certs import TLSFiles
from tests.support.events import run_event
from tests.support.servers import Server, start_server

NDJSON = {"Content-Type": "application/x-ndjson"}
# Runs the command as `metastore` does and reports the process's peak RSS on its last stderr line:
# VmHWM, the peak of this program's memory alone (getrusage's maxrss would count the test process
# it was forked from, which exec does not reset).
MEASURED = (
    "import re, sys\n"
    "from metastore.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "peak = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)\n"
    "sys.stderr.write('\\nPEAK_RSS_KB %s\\n' % peak)\n"
    "sys.exit(code)\n"
)


class Done:
    def __init__(self, done: subprocess.CompletedProcess[str], seconds: float) -> None:
        self.code, self.stdout, self.seconds = done.returncode, done.stdout, seconds
        lines = done.stderr.splitlines()
        self.peak_mb = int(lines[-1].split()[1]) / 1024
        self.stderr = "\n".join(lines[:-1])

    @property
    def errors(self) -> list[str]:
        """The command's own lines (not log records), without the one saying where it posts."""
        return [
            line for line in self.stderr.splitlines() if line.startswith("metastore ") and ": posting to " not in line
        ]

    def one_error(self) -> str:
        assert "Traceback" not in self.stderr, self.stderr
        [line] = self.errors
        return line


def metastore(*args: str | Path, timeout: float = 120) -> Done:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout
    )
    return Done(done, time.monotonic() - started)


def feed_line(i: int, event: str = '{"eventType": "COMPLETE"}') -> bytes:
    return (
        f'{{"id": {i}, "event": {event}, "cursor": "MDo{i}", "received_at": "2024-01-01T00:00:00+00:00", '
        f'"source_kind": "unauthenticated", "source_principal": null}}\n'
    ).encode()


def serving(*replies: Reply) -> Receiver:
    """A server whose GET /api/v1/events answers the replies in turn (the last one again and again)."""
    queue = list(replies)

    def script(got: Got) -> Reply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return Receiver(script)


# -- export from hostile servers ----------------------------------------------------------------


def test_a_line_that_never_ends_stops_export_at_the_line_limit_in_bounded_memory(tmp_path: Path) -> None:
    """1 GiB without a newline: the export stops once the line passes --max-line-bytes (64 MiB by
    default), holding about that much, where it read the whole line before."""
    with serving(Reply(200, b"", NDJSON, chunks=endless(b"x" * 65536, 1 << 30))) as server:
        done = metastore("export", "--from", server.url, "-o", tmp_path / "out.ndjson")
    assert done.code == 1
    assert done.one_error().startswith(
        f"metastore export: {server.url}/api/v1/events sent a line longer than 67108864 bytes (--max-line-bytes)"
    )
    assert done.peak_mb < 400, done.peak_mb
    assert (tmp_path / "out.ndjson").read_bytes() == b""


def test_an_error_answer_of_any_size_is_read_only_in_part(tmp_path: Path) -> None:
    for status in (500, 404):
        body = endless(b"<html>" + b"e" * 65530, 200 << 20)
        with serving(Reply(status, b"", {"Content-Type": "text/html"}, chunks=body)) as server:
            done = metastore("export", "--from", server.url, "-o", tmp_path / "out.ndjson", "--retries", "1")
        assert done.code == 1
        line = done.one_error()
        if status == 500:
            assert line.startswith(f"metastore export: reading {server.url}/api/v1/events failed 2 times in a row")
        else:
            assert line.startswith(f"metastore export: {server.url}/api/v1/events answered 404: <html>eee")
            assert "is it the base URL of a Metadata Store?" in line
        assert len(line) < 1000 and done.peak_mb < 150, (len(line), done.peak_mb)


def test_the_deadline_ends_an_export_that_trickles_or_never_ends(tmp_path: Path) -> None:
    """A server that sends a byte every 0.2 s (never a whole line) or valid lines for ever: with
    --deadline 3 the export ends (exit 3) within seconds, the file holding whole lines only."""
    stop = threading.Event()
    lines = (feed_line(i) for i in range(1, 1 << 40))
    try:
        for reply, least in (
            (Reply(200, b"", NDJSON, chunks=trickle(feed_line(1), 0.2, stop)), 0),
            (Reply(200, b"", NDJSON, chunks=lines), 100),
        ):
            out = tmp_path / "out.ndjson"
            with serving(reply) as server:
                done = metastore("export", "--from", server.url, "-o", out, "--deadline", "3")
            assert done.code == 3, done.stderr
            assert "the deadline of 3 s (--deadline) passed" in done.one_error()
            assert 3 <= done.seconds < 10, done.seconds
            written = out.read_bytes().splitlines()
            assert len(written) >= least and all(json.loads(line)["id"] > 0 for line in written)
            if written:
                assert f"resume with --cursor MDo{len(written)}" in done.one_error()
    finally:
        stop.set()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(200, b"<html>hello</html>", {"Content-Type": "text/html"}), "answered 200 with text/html, not the"),
        (Reply(200, feed_line(1) + b"not a line\n", NDJSON), "line 2 of the answer: not a line of the event feed"),
        (Reply(200, feed_line(1) + b'{"id": 2, "event": {}}\n', NDJSON), "line 2 of the answer: not a line of the"),
        (Reply(200, b'{"id": 1, "event": {"a": "\\"}', NDJSON), "the stream ended in the middle of a line"),
    ],
)
def test_answers_that_are_not_the_feed_end_export_with_one_line(reply: Reply, expected: str, tmp_path: Path) -> None:
    with serving(reply) as server:
        done = metastore("export", "--from", server.url, "-o", tmp_path / "out.ndjson", "--retries", "0")
    assert done.code == 1 and expected in done.one_error(), done.stderr


@pytest.mark.parametrize(
    ("event", "fault"),
    [
        (b'{"a": "x}", "b": [{"c": "]"}]}', None),
        (b"{" * 20_000 + b"}" * 20_000, None),  # no recursion, however deep
        (b'{"a": 1}, 5', "something follows it"),  # would add an element to the batch's array
        (b'{"a": 1}, {"b": 2}', "the event ends before its cursor"),
        (b'{"a": "x}', "a string of the event is not closed"),
        (b'{"a": [1}', "a bracket of the event does not match"),
        (b'[{"a": 1}]', "not a JSON object"),
    ],
)
def test_an_event_goes_into_a_batch_only_as_one_whole_object(event: bytes, fault: str | None) -> None:
    line = feed_line(1, event.decode()).rstrip()
    if fault is None:
        assert transfer.split_line(line, check=True).payload == event
    else:
        with pytest.raises(ValueError, match=fault):
            transfer.split_line(line, check=True)
        assert transfer.split_line(line).payload == event  # export and replay pass it on as it is


def test_import_posts_to_the_batch_route_whichever_url_of_the_store_it_is_given() -> None:
    for given in (
        "https://s:8443",
        "https://s:8443/",
        "https://s:8443/api/v1/lineage",
        "https://s:8443/api/v1/lineage/batch",
    ):
        assert transfer.batch_url(given) == "https://s:8443/api/v1/lineage/batch"
    assert transfer.batch_url("https://u:p@s/x/?t=1") == "https://u:p@s/x/api/v1/lineage/batch?t=1"


def test_an_output_that_cannot_be_written_is_bad_usage(tmp_path: Path) -> None:
    done = metastore("export", "--from", "http://127.0.0.1:9", "-o", tmp_path / "no-such-dir" / "out.ndjson")
    assert done.code == 2 and "cannot write" in done.one_error()


# -- import of real gzip files ------------------------------------------------------------------


@pytest.fixture(scope="module")
def gigabyte_line(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gzip file of about 1 MB holding one line of 1 GiB: 64 members of 16 MiB of "a" each, then
    a newline (gzip readers read the members of a file as one stream)."""
    path = tmp_path_factory.mktemp("gz") / "one-line.ndjson.gz"
    member = gzip.compress(b"a" * (16 << 20), compresslevel=9)
    path.write_bytes(member * 64 + gzip.compress(b"\n"))
    with gzip.open(path, "rb") as check:
        assert len(check.read(17 << 20)) == 17 << 20  # the members read as one
    return path


def test_import_of_a_gigabyte_line_stops_at_the_line_naming_it_in_bounded_memory(gigabyte_line: Path) -> None:
    """The line is read up to --max-event-bytes (16 MiB, the store's default body limit) and no
    further: 2.4 GB before, a few tens of MB now."""
    assert gigabyte_line.stat().st_size < 2 << 20
    done = metastore("import", "--to", "http://127.0.0.1:9", gigabyte_line)
    assert done.code == 1
    assert done.one_error().startswith(f"metastore import: {gigabyte_line}:1: the line is longer than 16842752 bytes")
    assert done.peak_mb < 150, done.peak_mb


@pytest.fixture(scope="module")
def stores(pg_server: Any, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """A source store (its feed allowed 5 s a page, for the large events) and a target."""
    made: list[tuple[Database, Server]] = []
    try:
        for i, env in enumerate(({"METASTORE_READ_TIMEOUT_MS": "5000"}, {})):
            db = create_database(pg_server)
            log = tmp_path_factory.mktemp(f"store{i}") / "log"
            made.append((db, start_server(db.service_dsn, tls_files, log, **env)))
        yield made
    finally:
        for db, server in made:
            server.stop()
            drop_database(db)


def payloads(db: Database) -> list[str]:
    with psycopg.connect(db.owner_dsn) as conn:
        return [r[0] for r in conn.execute("SELECT payload::text FROM metastore.events ORDER BY xact_id, id")]


def clear(db: Database) -> None:
    """An empty store again (events are append-only: as the owner, the trigger aside)."""
    with psycopg.connect(db.owner_dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE metastore.events CASCADE")


def test_bad_lines_stop_an_import_at_the_line_with_what_came_before_stored(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    (_, _), (target_db, target) = stores
    clear(target_db)
    good = [feed_line(i, json.dumps(run_event(f"bad-lines-{i}"))) for i in (1, 2)]
    cases = {
        "not-json.ndjson.gz": (good[0] + b"this is not json\n" + good[1], ":2: not a line of the event feed"),
        "cut.ndjson.gz": (good[0] + good[1][:-30] + b"\n", ":2: not a line of the event feed: no cursor"),
        "unbalanced.ndjson": (good[0] + feed_line(2, '{"a": [}'), ":2: a bracket of the event does not match"),
    }
    for name, (content, expected) in cases.items():
        path = tmp_path / name
        if name.endswith(".gz"):
            with gzip.open(path, "wb") as out:
                out.write(content)
        else:
            path.write_bytes(content)
        done = metastore("import", "--to", target.url, "--ca", tls_files.ca, path)
        assert done.code == 1 and done.one_error().startswith(f"metastore import: {path}{expected}"), done.stderr
        assert len(payloads(target_db)) == 1  # the line before it was stored (once: a second time is a duplicate)

    broken = tmp_path / "broken.ndjson.gz"
    broken.write_bytes(gzip.compress(b"".join(good))[:-20] + b"\x00" * 20)
    done = metastore("import", "--to", target.url, "--ca", tls_files.ca, broken)
    assert done.code == 1 and "broken.ndjson.gz:" in done.one_error() and "cannot be read" in done.one_error()
    missing = metastore("import", "--to", target.url, "--ca", tls_files.ca, tmp_path / "nowhere.ndjson")
    assert missing.code == 2 and "cannot read" in missing.one_error()


def test_an_event_the_target_refuses_alone_spoils_no_batch(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    """A batch holding an event with a key twice is refused whole (400): its events are posted one
    by one, the target judges each, and only that one fails, named by its line."""
    (_, _), (target_db, target) = stores
    clear(target_db)
    twice = '{"eventTime": "2024-01-01T00:00:00Z", "eventType": "COMPLETE", "producer": "p", "run": {"runId": "x", '
    twice += '"runId": "y"}, "job": {"namespace": "n", "name": "j"}}'
    lines = [feed_line(1, json.dumps(run_event("one"))), feed_line(2, twice), feed_line(3, json.dumps(run_event("3")))]
    path = tmp_path / "events.ndjson"
    path.write_bytes(b"".join(lines))
    done = metastore("import", "--to", target.url + "/api/v1/lineage", "--ca", tls_files.ca, path)
    assert done.code == 0, done.stderr
    assert f"metastore import: posting to {target.url}/api/v1/lineage/batch" in done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert (summary["read"], summary["stored"], summary["failed"]) == (3, 2, 1)
    assert summary["failed_events"][0]["line"] == f"{path}:2" and summary["failed_events"][0]["status"] == 400
    assert len(payloads(target_db)) == 2


def summary_reply(status: int, failed: int, failed_events: list[Any]) -> Reply:
    summary = {"received": 3, "stored": 3 - failed, "duplicates": 0, "failed": failed}
    return Reply(
        status, json.dumps({"status": "partial_success", "summary": summary, "failed_events": failed_events}).encode()
    )


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(404, b"no such route", {"Content-Type": "text/plain"}), "answered 404: no such route"),
        (Reply(401, b"who are you"), "answered 401"),
        (Reply(403, b"not you"), "answered 403"),
        (Reply(413, b"too large"), "answered 413"),
        (Reply(429, b"slow down"), "answered 429"),
        # A summary in an answer that says nothing about the events is not read.
        (summary_reply(503, 0, []), "answered 503"),
        (
            summary_reply(200, 1, [{"index": 1, "code": "53300", "reason": "busy", "retriable": True}]),
            'answered 200 without storing an event it did not judge ({"index": 1, "code": "53300"',
        ),
        (summary_reply(200, 1, []), "answered 200 without storing an event it did not judge (1 failed, 0 named)"),
        (
            summary_reply(200, 1, [{"index": 7, "code": "22023", "retriable": False}]),
            'answered 200 without storing an event it did not judge ({"index": 7',
        ),
    ],
)
def test_import_stops_at_answers_that_say_nothing_about_the_events(reply: Reply, expected: str, tmp_path: Path) -> None:
    """The batch route's answer, or a summary's failure, that does not judge an event (400, 422, or a
    failure the summary names as not retriable): the import exits 1 with one line naming the answer
    and the URL, and prints no summary, as if the events were stored or judged."""
    path = tmp_path / "events.ndjson"
    path.write_bytes(b"".join(feed_line(i, json.dumps(run_event(f"nothing-{i}"))) for i in (1, 2, 3)))
    with Receiver(lambda got: reply) as receiver:
        done = metastore("import", "--to", receiver.url, "--retries", "0", path)
        assert len(receiver.requests("POST", "/api/v1/lineage/batch")) == 1
    assert done.code == 1, done.stderr
    assert done.one_error().startswith(f"metastore import: {receiver.url}/api/v1/lineage/batch {expected}")
    assert done.stdout == ""


def test_an_import_to_a_wrong_url_fails_and_one_to_the_right_url_then_stores_every_event(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    """--to given as https://target/api/v1: the batch goes to /api/v1/api/v1/lineage/batch, whose 404
    says nothing about the events; then the right URL stores every one."""
    (_, _), (target_db, target) = stores
    clear(target_db)
    events = [json.dumps(run_event(f"wrong-url-{i}")) for i in range(5)]
    path = tmp_path / "events.ndjson"
    path.write_bytes(b"".join(feed_line(i, e) for i, e in enumerate(events, 1)))
    wrong = metastore("import", "--to", f"{target.url}/api/v1", "--ca", tls_files.ca, path)
    assert wrong.code == 1, wrong.stderr
    assert wrong.one_error().startswith(f"metastore import: {target.url}/api/v1/api/v1/lineage/batch answered 404")
    assert payloads(target_db) == []
    right = metastore("import", "--to", target.url, "--ca", tls_files.ca, path)
    assert right.code == 0, right.stderr
    summary = json.loads(right.stdout.splitlines()[-1])
    assert (summary["read"], summary["stored"], summary["failed"]) == (5, 5, 0)
    stored = sorted(json.dumps(json.loads(p), sort_keys=True) for p in payloads(target_db))
    assert stored == sorted(json.dumps(json.loads(e), sort_keys=True) for e in events)


# -- real stores: events nested deep or printing large ------------------------------------------


def store_as_owner(db: Database, payload: str) -> None:
    """Stored as an earlier release could store it, past any check of this one's ingest."""
    with psycopg.connect(db.owner_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO metastore.events (payload, payload_sha256, event_kind, event_time) "
            "SELECT j, sha256(convert_to(j::text, 'UTF8')), 'run', (j ->> 'eventTime')::timestamptz "
            "FROM (SELECT %s::jsonb AS j) AS e",
            (payload,),
        )


DEEP = (
    '{"eventTime": "2024-09-01T00:00:01Z", "eventType": "COMPLETE", "producer": "p", "run": {"runId": "deep", '
    '"facets": {"d": {"v": ' + "[" * 10_000 + "]" * 10_000 + '}}}, "job": {"namespace": "n", "name": "deep"}}'
)
LARGE = (
    '{"eventTime": "2024-09-01T00:00:02Z", "eventType": "COMPLETE", "producer": "p", "run": {"runId": "large", '
    '"facets": {"n": {"v": [' + ",".join(["1e308"] * 60_000) + ']}}}, "job": {"namespace": "n", "name": "large"}}'
)


def test_events_nested_10000_deep_or_printing_18_mb_pass_export_replay_and_import(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    """Export cuts each event out of its line without a parser (a RecursionError before), replay
    sends them (an 18.6 MB event gets its time: the timeout plus a second per MiB), and import
    stores what the target takes, stopping at the line of an event larger than the target's limit."""
    (source_db, source), (target_db, target) = stores
    clear(source_db)
    clear(target_db)
    store_as_owner(source_db, json.dumps(run_event("before", event_time="2024-09-01T00:00:00Z")))
    store_as_owner(source_db, DEEP)
    store_as_owner(source_db, LARGE)
    dump = tmp_path / "events.ndjson.gz"
    exported = metastore("export", "--from", source.url, "--ca", tls_files.ca, "-o", dump)
    assert exported.code == 0 and "Traceback" not in exported.stderr, exported.stderr
    with gzip.open(dump, "rb") as f:
        lines = f.read().splitlines()
    stored = payloads(source_db)
    assert [len(line) > len(p) for line, p in zip(lines, stored, strict=True)] == [True] * 3
    assert len(stored[2]) > 18_000_000

    accepted: list[bytes] = []

    def sink(got: Got) -> Reply:
        accepted.append(got.body)
        return Reply(201)

    with Receiver(sink) as receiver:
        replayed = metastore("replay", "--from", source.url, "--ca", tls_files.ca, "--to", receiver.url)
    assert replayed.code == 0, replayed.stderr
    assert accepted == [p.encode() for p in stored]

    imported = metastore("import", "--to", target.url, "--ca", tls_files.ca, dump)
    assert imported.code == 1
    assert imported.one_error().startswith(f"metastore import: {dump}:3: the line is longer than 16842752 bytes")
    # The two before it are stored: the deep one as the target's rules have it, stored or refused.
    assert payloads(target_db)[0] == stored[0]
    assert imported.peak_mb < 400, imported.peak_mb
