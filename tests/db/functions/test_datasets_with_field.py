"""metastore.datasets_with_field over enough datasets to take both of its ways: the GIN index and a
sort for a field few datasets have, a walk in name order for one more than 5000 have. Both must
give what an independent reading of the tables gives, in (namespace, name) byte order."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.support.stats import xact_stat

# Namespaces that are prefixes of each other, upper case before lower case, and non-ASCII names:
# byte order is not the order of a linguistic collation.
NAMESPACES = ["a", "a/b", "ab", "B", "é"]
PER_NAMESPACE = 6000  # 30 000 datasets: "id", "late" and "fifth" are each in more than 5000


def build(owner: psycopg.Connection[Any]) -> None:
    owner.execute(
        """
        INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)
        SELECT ns, CASE WHEN i %% 7 = 0 THEN 'Ä' || i WHEN i %% 5 = 0 THEN 'T' || i ELSE 't' || i END,
               'dataset', now(), now()
          FROM unnest(%s::text[]) AS ns, generate_series(1, %s) AS i
        """,
        (NAMESPACES, PER_NAMESPACE),
    )
    # Fields: "id" everywhere; "late" in the namespaces that sort last (the walk passes 12 000 datasets
    # without it first); "fifth" in one of five (a page of n spans chunks: the first has 4n datasets);
    # "rare" in one of 400. Every 50th dataset has a newer version
    # without "id": "id" is no longer among its current fields.
    owner.execute(
        """
        INSERT INTO metastore.dataset_schema_versions (dataset_id, fields_sha256, fields, first_event_id,
                                                       first_seen, last_seen)
        SELECT d.id, sha256(convert_to(f::text, 'UTF8')), f, 1, '2026-01-01', '2026-01-01'
          FROM metastore.datasets AS d
         CROSS JOIN LATERAL (SELECT substring(d.name FROM '[0-9]+')::int AS i) AS n
         CROSS JOIN LATERAL (SELECT jsonb_build_array(jsonb_build_object('name', 'id'))
                                    || CASE WHEN d.namespace IN ('a/b', 'ab', 'é') THEN '[{"name": "late"}]'
                                            ELSE '[]' END::jsonb
                                    || CASE WHEN n.i % 5 = 1 THEN '[{"name": "fifth"}]' ELSE '[]' END::jsonb
                                    || CASE WHEN n.i % 400 = 0 THEN '[{"name": "rare"}]' ELSE '[]' END::jsonb
                                    AS f) AS x
        """
    )
    owner.execute(
        """
        INSERT INTO metastore.dataset_schema_versions (dataset_id, fields_sha256, fields, first_event_id,
                                                       first_seen, last_seen)
        SELECT d.id, sha256(convert_to('[{"name": "key"}]', 'UTF8')), '[{"name": "key"}]', 2,
               '2026-01-02', '2026-01-02'
          FROM metastore.datasets AS d WHERE d.id % 50 = 0
        """
    )


def oracle(owner: psycopg.Connection[Any]) -> list[tuple[tuple[str, str], list[str]]]:
    """Each dataset's current field names, read whole in Python, sorted by the UTF-8 bytes."""
    newest: dict[int, tuple[Any, tuple[str, str], list[str]]] = {}
    rows = owner.execute(
        "SELECT d.id, d.namespace, d.name, v.last_seen, v.first_seen, v.fields_sha256, v.fields"
        " FROM metastore.datasets AS d JOIN metastore.dataset_schema_versions AS v ON v.dataset_id = d.id"
    )
    for dataset_id, namespace, name, last, first, sha, fields in rows:
        # The current version: the latest last_seen, then first_seen, then the smallest hash.
        rank = (last, first, bytes(255 - b for b in sha))
        if dataset_id not in newest or rank > newest[dataset_id][0]:
            newest[dataset_id] = (rank, (namespace, name), [f.get("name") for f in fields])
    return sorted(((d, names) for _, d, names in newest.values()), key=lambda x: key(x[0]))


def search(service: psycopg.Connection[Any], field: str, limit: int) -> list[tuple[str, str]]:
    row = service.execute("SELECT metastore.datasets_with_field(%s, %s::int)", (field, limit)).fetchone()
    assert row is not None
    return [(d["namespace"], d["name"]) for d in row[0]["datasets"]]


def test_both_ways_give_the_oracles_page(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    build(owner)
    with_late = owner.execute(
        """SELECT count(*) FROM metastore.dataset_schema_versions
            WHERE jsonb_path_query_array(fields, '$[*].name') @> '["late"]'"""
    ).fetchone()
    assert with_late is not None and with_late[0] > 5000  # the walk, over several chunks
    current = oracle(owner)
    limits = {"fifth": (*range(1, 41), 333, 1000), "id": (1, 100), "late": (7, 1000), "rare": (3, 1000), "none": (5,)}
    for field, cases in limits.items():
        found = [d for d, names in current if field in names]
        for limit in cases:
            assert search(service, field, limit) == found[:limit], (field, limit)
    # Not the current fields any more: datasets whose newer version dropped "id", though they sort
    # inside the page, are not on it.
    page = search(service, "id", 1000)
    dropped = [
        (ns, name) for ns, name in owner.execute("SELECT namespace, name FROM metastore.datasets WHERE id % 50 = 0")
    ]
    inside = [d for d in dropped if key(d) < key(page[-1])]
    assert inside and not set(inside) & set(page)
    assert set(inside) <= set(search(service, "key", 1000))


def key(dataset: tuple[str, str]) -> bytes:
    return dataset[0].encode() + b"\x00" + dataset[1].encode()


def test_a_field_many_datasets_dropped_is_found_among_the_few_that_have_it(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Counted by current versions: "gone" was in an older version of 6000 datasets and is in the
    current one of 3, so their page is sorted from those 3; counted by versions, every dataset was
    walked to find them."""
    build(owner)
    owner.execute(
        """
        INSERT INTO metastore.dataset_schema_versions (dataset_id, fields_sha256, fields, first_event_id,
                                                       first_seen, last_seen)
        SELECT d.id, sha256(convert_to(f::text, 'UTF8')), f, 3, t, t
          FROM metastore.datasets AS d
         CROSS JOIN LATERAL (SELECT CASE WHEN d.id % 9000 = 0 THEN timestamptz '2026-03-01'
                                         ELSE timestamptz '2025-01-01' END AS t,
                                    '[{"name": "gone"}, {"name": "was"}]'::jsonb AS f) AS x
         WHERE d.id % 5 = 0
        """
    )
    found = [d for d, names in oracle(owner) if "gone" in names]
    assert len(found) == 3
    with service.transaction():
        assert search(service, "gone", 100) == found
        assert xact_stat(service, "datasets", "idx_tup_fetch") + xact_stat(service, "datasets", "seq_tup_read") < 100
