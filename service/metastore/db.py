"""Connection pools and the one way the service calls the database: a named query,
parameters, and a deadline that holds even when PostgreSQL does not answer at all.

Each kind of work has its own pool and budget, so that one kind can never starve another:
`ingest` (POSTs, on Trino's clock), `large` (POSTs of large events, on the same clock, a few at a
time so that they cannot take the others' connections or CPU), `read` (the datasets API and view), `writer` (the async
writers, not on anyone's clock) and `health` (the readiness canary, one connection). With a read
replica (METASTORE_READ_REPLICA_URL), `replica` serves the datasets API and view while it is within
METASTORE_READ_REPLICA_MAX_LAG_S of the primary, and `replica_probe` measures how far behind it is."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.rows import AsyncRowFactory, namedtuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from metastore import ledger, metrics, pgconn, sql
from metastore.config import Config
from metastore.errors import EXPLAINED, SCHEMA_MISMATCH, ApiError, http_status

log = logging.getLogger("metastore.db")

RECONNECT_S = 10.0

# When a call last met a schema mismatch, and the reason it gave.
_mismatch_seen: tuple[float, str] | None = None


class _BodyDumper(Dumper):
    """bytes to bytea (binary) as they are. psycopg's own binary dumper copies each one into a new
    bytearray first: a third copy of every event body (with the body and libpq's send buffer) while
    it is stored."""

    format = Format.BINARY
    oid = psycopg.postgres.types["bytea"].oid

    def dump(self, obj: Buffer) -> Buffer:
        return obj


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    conn.adapters.register_dumper(bytes, _BodyDumper)


class Pool:
    def __init__(
        self,
        config: Config,
        name: str,
        min_size: int,
        max_size: int,
        statement_timeout_ms: int,
        deadline_s: float,
        url: str | None = None,
    ) -> None:
        self.name = name
        # The whole call (waiting for a connection included) answers within this.
        self.deadline_s = deadline_s
        settings = {
            "autocommit": True,  # each call is one function call, committed when it returns
            "connect_timeout": config.db_connect_timeout_s,
            # Which part of which component a session is, in pg_stat_activity (the connection
            # string's application_name does not override it).
            "application_name": f"metastore-server-{name}",
            # The server's own backstop of the deadline; idle transactions cannot hold locks.
            "options": f"-c statement_timeout={statement_timeout_ms} -c idle_in_transaction_session_timeout=10000",
            # Notice a peer that vanished (dropped packets) within seconds, not hours.
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
            "tcp_user_timeout": max(statement_timeout_ms, 2000),
        }
        self.pool: AsyncConnectionPool = AsyncConnectionPool(
            url or config.database_url,
            min_size=min_size,
            max_size=max_size,
            timeout=deadline_s,
            open=False,
            name=f"metastore-{name}",
            # An empty query before each use: a connection PostgreSQL dropped (restart,
            # failover) is replaced instead of failing a request.
            check=AsyncConnectionPool.check_connection,
            configure=_configure,
            # An attempt to connect backs off (1, 2, 4 ... s) and gives up after this; the next
            # request that finds no connection starts another. Never giving up (inf) let the
            # backoff grow with the outage: a pool recovered minutes after a long one.
            reconnect_timeout=RECONNECT_S,
            # Called for each new connection: credentials from files are read anew each time.
            kwargs=lambda: settings | credentials(config),
        )
        self._orphans: set[asyncio.Task[Any]] = set()

    async def open(self) -> None:
        # Do not wait for the database: the service starts, and /readyz says when it can work.
        await self.pool.open(wait=False)

    async def close(self) -> None:
        for task in self._orphans:
            task.cancel()
        await self.pool.close(timeout=5)

    def record_stats(self) -> None:
        stats = self.pool.get_stats()
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        metrics.POOL.labels(self.name, "idle").set(idle)
        metrics.POOL.labels(self.name, "busy").set(size - idle)
        metrics.POOL_WAITING.labels(self.name).set(stats.get("requests_waiting", 0))

    async def _run(
        self, query: str, params: dict[str, Any], fetch_all: bool, row: AsyncRowFactory[Any], binary: bool
    ) -> list[Any]:
        async with self.pool.connection() as conn, conn.cursor(row_factory=row) as cur:
            await cur.execute(sql.query(query), params, binary=binary)
            return await cur.fetchall() if fetch_all else [r for r in [await cur.fetchone()] if r is not None]

    async def call(
        self,
        query: str,
        params: dict[str, Any],
        *,
        deadline_s: float | None = None,
        fetch_all: bool = False,
        row: AsyncRowFactory[Any] = namedtuple_row,
        binary: bool = False,
        on_done: Callable[[], None] | None = None,
    ) -> list[Any]:
        """Run a named query; raise ApiError (4xx for the client's mistakes, 503 when the
        database is unavailable or misses the deadline). Rows are read by column name: named
        tuples, or what `row` makes (e.g. class_row(Stored)); binary: results in PostgreSQL's
        binary format (a bytea arrives as bytes, without the hex text form). on_done is called
        once the query has really ended, which for a call past its deadline is after the answer
        (the parameters are held until then: what the caller counts as held is given back there)."""
        deadline = self.deadline_s if deadline_s is None else deadline_s
        started = time.perf_counter()
        task = asyncio.create_task(self._run(query, params, fetch_all, row, binary))
        if on_done is not None:
            task.add_done_callback(lambda _: on_done())
        result = "error"
        try:
            # Not asyncio.wait_for: cancelling a query waits for PostgreSQL to confirm, and a
            # paused server never does. The caller gets its answer at the deadline; the task
            # finishes its cancellation in the background.
            done, _ = await asyncio.wait({task}, timeout=deadline)
            if not done:
                result = "timeout"
                task.cancel()
                self._orphans.add(task)
                task.add_done_callback(self._orphans.discard)
                task.add_done_callback(_consume)
                raise ApiError(503, f"the database did not answer within {deadline:.1f} s; retry later", "57014")
            try:
                rows = task.result()
            except PoolTimeout:
                raise ApiError(503, "no database connection is available; retry later") from None
            except psycopg.Error as exc:
                status = http_status(exc.sqlstate)
                if exc.sqlstate in SCHEMA_MISMATCH:
                    reason = await self._mismatch(query, exc, started + deadline)
                    raise ApiError(503, reason, exc.sqlstate) from None
                if exc.sqlstate == "42501":
                    log.error("the service's database role may not run %s: grant it the app role (%s)", query, exc)
                elif status >= 500 and exc.sqlstate not in EXPLAINED:
                    log.warning("database call %s failed: %s %s", query, exc.sqlstate, str(exc).strip())
                    raise ApiError(
                        status, "the database could not complete the request; retry later", exc.sqlstate
                    ) from None
                message = exc.diag.message_primary or str(exc)
                if exc.sqlstate in EXPLAINED and exc.diag.message_hint:
                    message = f"{message}. {exc.diag.message_hint}"
                raise ApiError(status, message, exc.sqlstate) from None
            result = "ok"
            return rows
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            metrics.DB_CALLS.labels(query, result).observe(time.perf_counter() - started)

    async def _mismatch(self, query: str, exc: psycopg.Error, until: float) -> str:
        """/readyz's reason for a call that met an undefined table or function: the schema's
        version, asked within what is left of the call's deadline (remembered for a second, so
        that a flood of failing calls does not double the load)."""
        global _mismatch_seen
        now = time.perf_counter()
        if _mismatch_seen is not None and now - _mismatch_seen[0] < 1.0:
            return _mismatch_seen[1]
        detail = exc.diag.message_primary or exc.sqlstate or ""
        log.error("database call %s met a schema this release does not know: %s %s", query, exc.sqlstate, detail)
        version: int | None = None
        known = query == "schema_version"  # that very call failed: there is no version to read
        if not known and until - now > 0.05:
            try:
                (version,) = await self.one("schema_version", {}, deadline_s=until - now)
                known = True
            except ApiError as failure:
                known = failure.code in SCHEMA_MISMATCH
        verdict = ledger.schema_verdict(version) if known else None
        if verdict is not None:
            reason = f"{verdict[0]}: {verdict[1]}"
        else:
            # The version is this release's (or could not be read): the functions or tables are
            # another release's, e.g. after a revert with a newer image.
            reason = (
                f"schema mismatch: the database's functions or tables are not this release's ({detail}): "
                "run metastore db deploy with this release's image, then metastore db verify"
            )
        _mismatch_seen = (time.perf_counter(), reason)
        return reason

    async def one(
        self,
        query: str,
        params: dict[str, Any],
        *,
        deadline_s: float | None = None,
        row: AsyncRowFactory[Any] = namedtuple_row,
        on_done: Callable[[], None] | None = None,
    ) -> Any:
        rows = await self.call(query, params, deadline_s=deadline_s, row=row, on_done=on_done)
        if not rows:
            raise ApiError(500, f"{query} returned no row")
        return rows[0]


class Database:
    def __init__(self, config: Config, writers: int) -> None:
        ingest_ms, read_ms = config.ingest_timeout_ms, config.read_timeout_ms
        self.ingest = Pool(config, "ingest", config.pool_min, config.pool_max, ingest_ms, ingest_ms / 1000)
        self.read = Pool(config, "read", 0, config.read_pool_max, read_ms, read_ms / 1000)
        self.health = Pool(config, "health", 1, 1, config.ready_timeout_ms, config.ready_timeout_ms / 1000)
        # Events over METASTORE_LARGE_EVENT_BYTES, on connections of their own: libpq keeps a
        # connection's send buffer at the largest message it sent, so only these hold body-sized ones.
        self.large = Pool(config, "large", 0, config.large_event_calls, ingest_ms, ingest_ms / 1000)
        # Async writers, spool replay, forwarding and partition maintenance: on nobody's clock.
        self.writer = Pool(
            config, "writer", 0, max(writers, 1), config.db_timeout_ms, config.db_timeout_ms / 1000 + 0.5
        )
        self.pools = [self.ingest, self.large, self.read, self.health, self.writer]
        self.replica = Replica(config, self.health) if config.read_replica_url else None
        if self.replica is not None:
            self.pools += [self.replica.pool, self.replica.probe]

    async def open(self) -> None:
        for pool in self.pools:
            await pool.open()

    async def close(self) -> None:
        for pool in self.pools:
            await pool.close()

    def record_pool_stats(self) -> None:
        for pool in self.pools:
            pool.record_stats()
        if self.replica is not None:
            self.replica.record()

    async def read_one(self, query: str, params: dict[str, Any]) -> Any:
        """A read of the datasets API or the view: on the replica while it is usable, else (and
        when it fails within the read budget) on the primary's read pool."""
        replica = self.replica
        if replica is None:
            return await self.read.one(query, params)
        if not replica.usable():
            replica.fell_back(replica.fallback_reason())
            return await self.read.one(query, params)
        started = time.monotonic()
        try:
            return await replica.pool.one(query, params)
        except ApiError as exc:
            if exc.status < 500:
                raise  # the request's own mistake: the primary would say the same
            replica.failed(exc)
            left = self.read.deadline_s - (time.monotonic() - started)
            if left < MIN_RETRY_S:
                raise
            replica.fell_back("error")
            return await self.read.one(query, params, deadline_s=left)


# How often the replica's lag is measured; its bound grows by the time since, so it is kept small.
CHECK_S = 1.0
# Less than this left of the read budget after the replica failed: no second attempt on the primary.
MIN_RETRY_S = 0.05
# SQLSTATEs of a replica failing as a server (no connection, no answer in time), not of one query.
_REPLICA_DOWN = (None, "57014", "57P01", "57P02", "57P03")


class Replica:
    """A streaming replica (hot standby) for the reads, and how far behind the primary it is.

    Lag is measured by WAL position, not by the replay timestamp (which grows on an idle primary
    whose replica is current): each second the primary's WAL insert position P is read at time T
    (every transaction committed before T ends before P), then the replica's replay position R.
    The newest T whose P the replica has replayed is when it was last known to hold everything the
    primary had committed; its lag is at most now - T, which keeps growing until a later check
    moves T on, so a replica that stops replaying or answering is given up in time even when the
    check itself hangs. Idle primary: P stays put, R reaches it, the lag stays about one check."""

    def __init__(self, config: Config, primary: Pool) -> None:
        url, read_ms, probe_ms = config.read_replica_url, config.read_timeout_ms, config.ready_timeout_ms
        self.pool = Pool(config, "replica", 0, config.read_pool_max, read_ms, read_ms / 1000, url=url)
        # Its own connection: a replica busy with reads still has its lag measured.
        self.probe = Pool(config, "replica_probe", 1, 1, probe_ms, probe_ms / 1000, url=url)
        self.primary = primary
        self.max_lag_s = float(config.read_replica_max_lag_s)
        self.samples: deque[tuple[float, int]] = deque()  # (T, P) of the primary, oldest first
        self.caught_up_at: float | None = None  # T (monotonic) of the newest P replayed
        self.state = "unchecked"
        self.reason = "not checked yet"

    def lag_s(self) -> float:
        """An upper bound of how far behind the primary the replica is now (inf: unknown)."""
        return math.inf if self.caught_up_at is None else time.monotonic() - self.caught_up_at

    def usable(self) -> bool:
        return self.state == "current" and self.lag_s() <= self.max_lag_s

    def fallback_reason(self) -> str:
        if self.state in ("current", "lagging"):
            return "lagging"
        return "not_standby" if self.state == "not a standby" else "unavailable"

    def fell_back(self, reason: str) -> None:
        metrics.REPLICA_FALLBACKS.labels(reason).inc()

    def failed(self, exc: ApiError) -> None:
        if exc.code in _REPLICA_DOWN:
            # Until the next check says otherwise: the reads in flight failed, the next ones do not.
            self._set("unavailable", f"a read failed: {exc.message}")

    def report(self) -> dict[str, Any]:
        """The replica's part of /readyz."""
        lag = self.lag_s()
        return {
            "state": "lagging" if self.state == "current" and not self.usable() else self.state,
            "reason": self.reason,
            "lag_seconds": None if math.isinf(lag) else round(lag, 3),
            "max_lag_seconds": self.max_lag_s,
            "reads_from": "replica" if self.usable() else "primary",
        }

    def record(self) -> None:
        metrics.REPLICA_LAG.set(self.lag_s())
        metrics.REPLICA_USABLE.set(1 if self.usable() else 0)

    async def watch(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.check()
            except Exception as exc:  # the loop outlives anything one check meets
                self._set("unavailable", f"the check failed: {type(exc).__name__}")
            self.record()
            await asyncio.sleep(max(CHECK_S - (time.monotonic() - started), 0.05))

    async def check(self) -> None:
        now = time.monotonic()
        try:
            (position,) = await self.primary.one("wal_insert_position", {})
            self.samples.append((now, int(position)))
        except ApiError as exc:
            # The older samples still bound the lag; without new ones it grows past the bound.
            log.debug("the primary's WAL position could not be read: %s", exc.message)
        while len(self.samples) > 1 and self.samples[0][0] < now - self.max_lag_s - 2 * CHECK_S:
            self.samples.popleft()
        try:
            row = await self.probe.one("replica_replay_position", {})
        except ApiError as exc:
            self._set("unavailable", f"the replica does not answer: {exc.message}")
            return
        if not row.standby or row.position is None:
            self.caught_up_at = None
            self._set("not a standby", "the replica is not in recovery: it is not a standby of the primary")
            return
        replayed = int(row.position)
        for at, wanted in reversed(self.samples):
            if wanted <= replayed:
                self.caught_up_at = max(self.caught_up_at or at, at)
                break
        lag = self.lag_s()
        if lag <= self.max_lag_s:
            self._set("current", f"behind the primary by at most {lag:.1f} s")
        else:
            self._set("lagging", f"behind the primary by more than {self.max_lag_s:g} s")

    def _set(self, state: str, reason: str) -> None:
        if state != self.state:
            level = logging.INFO if state == "current" else logging.WARNING
            where = "from the replica" if state == "current" else "from the primary"
            log.log(level, "read replica %s (%s): reads are served %s", state, reason, where)
        self.state, self.reason = state, reason


def credentials(config: Config) -> dict[str, str]:
    """The user and password from mounted files (METASTORE_DATABASE_USER_FILE and
    METASTORE_DATABASE_PASSWORD_FILE), read at each new connection so that a rotated Secret is
    used without a restart; they win over the connection string and PGUSER/PGPASSWORD."""
    return pgconn.read_credentials(
        (
            ("user", "METASTORE_DATABASE_USER_FILE", config.database_user_file),
            ("password", "METASTORE_DATABASE_PASSWORD_FILE", config.database_password_file),
        )
    )


def _consume(task: asyncio.Task[Any]) -> None:
    # Retrieve the outcome of an abandoned call so asyncio does not log it as never retrieved.
    if not task.cancelled():
        task.exception()
