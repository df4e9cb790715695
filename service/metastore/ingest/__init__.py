"""Storing events: at once (sync), or through a queue that writers drain into PostgreSQL in
batches (async mode; and sync mode's overflow when the database misses the ingest budget and a
spool is configured).

Queued events wait in memory, or, with a spool, on disk (fsynced before the 202; only a
reference stays in memory). What can be lost: without a spool, what was queued when the process
died without a graceful shutdown (SIGKILL, OOM kill, node loss), at most the queue's bounds;
with a spool, nothing acknowledged unless the spool's volume is lost.

modes.py: the modes and build(), which picks one from the configuration; group.py and large.py:
sync mode's calls (group commit, the large events' lane); breaker.py; writers.py: the queue and
its writers; faults.py: whose fault a failure is, and the halving of batches; outcome.py: what
became of each event, counted.
"""

from metastore.ingest.breaker import Breaker
from metastore.ingest.faults import environmental, fault, halves
from metastore.ingest.group import GroupCommit, pinned, store_now
from metastore.ingest.large import LargeLane
from metastore.ingest.modes import Mode, Queued, Sync, SyncSpooled, build
from metastore.ingest.outcome import UNAUTHENTICATED, Source, Stored
from metastore.ingest.writers import EventQueue, Ingest, Item

__all__ = [
    "UNAUTHENTICATED",
    "Breaker",
    "EventQueue",
    "GroupCommit",
    "Ingest",
    "Item",
    "LargeLane",
    "Mode",
    "Queued",
    "Source",
    "Stored",
    "Sync",
    "SyncSpooled",
    "build",
    "environmental",
    "fault",
    "halves",
    "pinned",
    "store_now",
]
