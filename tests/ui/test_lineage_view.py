"""A dataset's lineage picture and column lineage in a real Chromium, against the real server and
PostgreSQL, from OpenLineage events POSTed as Trino would send them (CTAS with `schema` and
`columnLineage` facets): the picture draws the API's graph, every box opens its dataset by
keyboard, 50 datasets fit without overlapping, and a chosen field shows its input fields."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import ARTIFACTS
from tests.support.servers import Server

NS = "trino://trino:8080"
LONG_NAME = "fan.up_19_whose_name_is_far_longer_than_any_box_can_hold"


def table(
    name: str, fields: list[tuple[str, str]], lineage: dict[str, list[tuple[str, str, str, str]]] | None = None
) -> dict[str, Any]:
    facets: dict[str, Any] = {"schema": {"fields": [{"name": f, "type": t} for f, t in fields]}}
    if lineage is not None:
        facets["columnLineage"] = {
            "fields": {
                out: {
                    "inputFields": [
                        {
                            "namespace": NS,
                            "name": src,
                            "field": field,
                            "transformations": [{"type": kind, "subtype": sub}],
                        }
                        for src, field, kind, sub in inputs
                    ]
                }
                for out, inputs in lineage.items()
            }
        }
    return {"namespace": NS, "name": name, "facets": facets}


def ctas(n: int, sql: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "eventTime": f"2024-04-01T10:{n // 60:02d}:{n % 60:02d}Z",
        "eventType": "COMPLETE",
        "run": {"runId": f"01900000-0000-7000-8000-{n:012d}"},
        "job": {"namespace": NS, "name": f"query_{n}", "facets": {"sql": {"query": sql}}},
        "inputs": inputs,
        "outputs": outputs,
    }


ORDERS = [("order_id", "bigint"), ("amount", "double"), ("customer_id", "bigint")]
CUSTOMERS = [("customer_id", "bigint"), ("region", "varchar")]


def chain() -> list[dict[str, Any]]:
    """raw.orders, raw.customers -> stage.orders_clean -> mart.sales_by_region -> report.kpis."""
    clean_lineage = {
        "order_id": [("raw.orders", "order_id", "DIRECT", "IDENTITY")],
        "amount": [("raw.orders", "amount", "DIRECT", "TRANSFORMATION")],
        "region": [
            ("raw.customers", "region", "DIRECT", "IDENTITY"),
            ("raw.orders", "customer_id", "INDIRECT", "JOIN"),
        ],
    }
    mart_lineage = {
        "region": [("stage.orders_clean", "region", "DIRECT", "IDENTITY")],
        "total": [("stage.orders_clean", "amount", "DIRECT", "AGGREGATION")],
    }
    kpi_lineage = {"total": [("mart.sales_by_region", "total", "DIRECT", "AGGREGATION")]}
    clean = [("order_id", "bigint"), ("amount", "double"), ("region", "varchar")]
    mart = [("region", "varchar"), ("total", "double")]
    return [
        ctas(
            1,
            "CREATE TABLE stage.orders_clean AS SELECT o.order_id, o.amount, c.region\n"
            "FROM raw.orders o JOIN raw.customers c USING (customer_id)",
            [table("raw.orders", ORDERS), table("raw.customers", CUSTOMERS)],
            [table("stage.orders_clean", clean, clean_lineage)],
        ),
        ctas(
            2,
            "CREATE TABLE mart.sales_by_region AS\n"
            "SELECT region, sum(amount) AS total FROM stage.orders_clean GROUP BY region",
            [table("stage.orders_clean", clean)],
            [table("mart.sales_by_region", mart, mart_lineage)],
        ),
        ctas(
            3,
            "CREATE TABLE report.kpis AS SELECT sum(total) AS total FROM mart.sales_by_region",
            [table("mart.sales_by_region", mart)],
            [table("report.kpis", [("total", "double")], kpi_lineage)],
        ),
    ]


def fan() -> list[dict[str, Any]]:
    """hub.center: 20 tables upstream, 15 downstream, and each of 14 of those feeds one more: 50 datasets
    within 2 hops. The second hop is named in the reverse order of the first, so ordering boxes by name
    alone would cross every pair of its edges."""
    ups = [{"namespace": NS, "name": f"fan.up_{i:02d}"} for i in range(19)]
    ups.append({"namespace": NS, "name": LONG_NAME})
    downs = [{"namespace": NS, "name": f"fan.down_{i:02d}"} for i in range(15)]
    events = [
        ctas(10, "INSERT INTO hub.center SELECT ...", ups, [{"namespace": NS, "name": "hub.center"}]),
        ctas(11, "CREATE TABLE ... AS SELECT ... FROM hub.center", [{"namespace": NS, "name": "hub.center"}], downs),
    ]
    for i in range(14):
        events.append(
            ctas(20 + i, "CREATE TABLE ...", [downs[i]], [{"namespace": NS, "name": f"fan.leaf_{13 - i:02d}"}])
        )
    return events


# Field names a path and a URL treat specially: each must reach the API as itself.
ODD_FIELDS = ["a/b", "..", ".", "100%", "x y", "q?#", "<b>f</b>\u200b"]


def odd() -> list[dict[str, Any]]:
    fields = [(f, "varchar") for f in ODD_FIELDS]
    lineage = {f: [("odd.source", f, "DIRECT", "IDENTITY")] for f in ODD_FIELDS}
    return [
        ctas(
            40,
            "CREATE TABLE odd.target AS SELECT * FROM odd.source",
            [table("odd.source", fields)],
            [table("odd.target", fields, lineage)],
        )
    ]


@pytest.fixture(scope="module")
def seeded(server: Server) -> Server:
    with server.client() as http:
        for event in [*chain(), *fan(), *odd()]:
            response = http.post("/api/v1/lineage", json=event)
            assert response.status_code in (200, 201), response.text
    return server


def dataset_id(server: Server, name: str) -> int:
    with server.client() as http:
        found = http.get("/api/v1/datasets", params={"q": name, "namespace": NS}).json()["datasets"]
    return next(d["id"] for d in found if d["name"] == name)


def api(server: Server, path: str, **params: Any) -> Any:
    with server.client() as http:
        response = http.get(f"/api/v1/{path}", params=params)
        assert response.status_code == 200, response.text
        return response.json()


def drawn(view: Page) -> tuple[set[int], set[tuple[int, int, str]]]:
    nodes = view.locator("#lineage-svg a.node").evaluate_all("ns => ns.map(n => Number(n.dataset.id))")
    edges = view.locator("#lineage-svg path.edge").evaluate_all(
        "ps => ps.map(p => [Number(p.dataset.from), Number(p.dataset.to),"
        " p.classList.contains('symlink') ? 'symlink' : 'lineage'])"
    )
    assert len(nodes) == len(set(nodes))
    return set(nodes), {tuple(e) for e in edges}


def expected(graph: dict[str, Any]) -> tuple[set[int], set[tuple[int, int, str]]]:
    return {n["id"] for n in graph["nodes"]}, {(e["from"], e["to"], e["kind"]) for e in graph["edges"]}


def test_the_picture_draws_the_graph_the_api_answers(page: Page, seeded: Server) -> None:
    mart = dataset_id(seeded, "mart.sales_by_region")
    page.goto(f"/ui/#/datasets/{mart}")
    expect(page.locator("#lineage-status")).to_contain_text("edges")
    graph = api(seeded, f"datasets/{mart}/lineage", direction="both", depth=2, limit=100)
    assert len(graph["nodes"]) == 5  # raw.orders, raw.customers, stage, mart, report
    assert drawn(page) == expected(graph)
    current = page.locator("#lineage-svg a.node.current")
    expect(current).to_have_count(1)
    expect(current).to_have_attribute("data-id", str(mart))
    expect(current).to_have_attribute("aria-current", "page")
    # Upstream left of the dataset, downstream right of it, by hop.
    x = {
        n["name"]: page.locator(f'#lineage-svg a.node[data-id="{n["id"]}"] rect').bounding_box()["x"]  # type: ignore[index]
        for n in graph["nodes"]
    }
    assert (
        x["raw.orders"] == x["raw.customers"] < x["stage.orders_clean"] < x["mart.sales_by_region"] < x["report.kpis"]
    )
    # The text alternative lists the same edges.
    items = page.locator("#lineage-edges li")
    expect(items).to_have_count(len(graph["edges"]))
    listed = items.evaluate_all("ls => ls.map(l => [Number(l.dataset.from), Number(l.dataset.to), l.dataset.kind])")
    assert {tuple(e) for e in listed} == expected(graph)[1]
    expect(page.locator("#lineage-edges")).to_contain_text(
        f"{NS} · stage.orders_clean → {NS} · mart.sales_by_region (1 job)"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#lineage").screenshot(path=str(ARTIFACTS / "dataset-lineage-graph.png"))

    # Depth and direction redraw from the API.
    page.get_by_label("Depth").select_option("1")
    page.get_by_label("Direction").select_option("upstream")
    graph = api(seeded, f"datasets/{mart}/lineage", direction="upstream", depth=1, limit=100)
    expect(page.locator("#lineage-svg a.node")).to_have_count(len(graph["nodes"]))
    assert drawn(page) == expected(graph) and len(graph["nodes"]) == 2
    page.get_by_label("Direction").select_option("downstream")
    page.get_by_label("Depth").select_option("5")
    expect(page.locator("#lineage-svg a.node")).to_have_count(2)
    expect(page.locator("#lineage-truncated")).to_have_count(0)


def test_every_box_opens_its_dataset_by_keyboard(page: Page, seeded: Server) -> None:
    mart = dataset_id(seeded, "mart.sales_by_region")
    stage = dataset_id(seeded, "stage.orders_clean")
    page.goto(f"/ui/#/datasets/{mart}")
    expect(page.locator("#lineage-svg a.node")).to_have_count(5)
    page.get_by_label("Most datasets").focus()
    reached: list[int] = []
    for _ in range(8):
        page.keyboard.press("Tab")
        node = page.evaluate(
            "document.activeElement.matches('#lineage-svg a.node') && Number(document.activeElement.dataset.id)"
        )
        if not node:
            break
        reached.append(node)
    assert sorted(reached) == sorted(expected(api(seeded, f"datasets/{mart}/lineage", depth=2))[0])
    # Left to right: the Tab order follows the picture.
    assert reached.index(stage) < reached.index(mart)
    while page.evaluate("Number(document.activeElement.dataset.id)") != stage:
        page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"#/datasets/{stage}$"))
    expect(page.locator("#detail-heading")).to_have_text("stage.orders_clean")
    expect(page.locator("#lineage-svg a.node.current")).to_have_attribute("data-id", str(stage))


def test_fifty_datasets_without_overlap_and_without_needless_crossings(page: Page, seeded: Server) -> None:
    hub = dataset_id(seeded, "hub.center")
    page.goto(f"/ui/#/datasets/{hub}")
    graph = api(seeded, f"datasets/{hub}/lineage", direction="both", depth=2, limit=100)
    assert len(graph["nodes"]) == 50 and not graph["truncated"]
    nodes = page.locator("#lineage-svg a.node")
    expect(nodes).to_have_count(50)
    assert drawn(page) == expected(graph)
    boxes = page.locator("#lineage-svg a.node rect").evaluate_all(
        "rs => rs.map(r => { const b = r.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })"
    )
    assert len(boxes) == 50
    for a, b in itertools.combinations(boxes, 2):
        assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    # Every name fits inside its box (long ones are shortened, in full in the title).
    overflow = page.locator("#lineage-svg a.node").evaluate_all(
        """ns => ns.filter(n => { const r = n.querySelector('rect').getBBox();
              return [...n.querySelectorAll('text')].some(t => { const b = t.getBBox();
                return b.x < r.x || b.x + b.width > r.x + r.width
                    || b.y < r.y || b.y + b.height > r.y + r.height; }); }).length"""
    )
    assert overflow == 0
    long = page.locator("#lineage-svg a.node").filter(has_text="fan.up_19")
    # Cut in the middle: its start and its end stay.
    expect(long.locator("text.node-name")).to_have_text(re.compile(r"^fan\.up_19_\w+…\w+_hold$"))
    expect(long.locator("title")).to_have_text(f"{NS} · {LONG_NAME}")
    # Name order alone crosses all 91 pairs of second-hop edges; the layout untangles them.
    assert page.locator("#lineage-svg").get_attribute("data-crossings") == "0"
    page.locator("#lineage").screenshot(path=str(ARTIFACTS / "dataset-lineage-50.png"))
    # A smaller node limit: the API cuts the graph and the page says so.
    page.get_by_label("Most datasets").select_option("25")
    expect(page.locator("#lineage-truncated")).to_be_visible()
    assert api(seeded, f"datasets/{hub}/lineage", direction="both", depth=2, limit=25)["truncated"] is True
    expect(nodes).to_have_count(25)


def test_choosing_a_field_shows_its_input_fields(page: Page, seeded: Server) -> None:
    stage = dataset_id(seeded, "stage.orders_clean")
    detail = api(seeded, f"datasets/{stage}")
    page.goto(f"/ui/#/datasets/{stage}")
    expect(page.locator("#fields-table tbody tr")).to_have_count(3)
    expect(page.locator("#field-inputs")).to_have_count(0)
    region = page.locator("#fields-table").get_by_role("button", name="region")
    for _ in range(30):  # by keyboard from the heading, past the picture
        if region.evaluate("b => b === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(region).to_be_focused()
    page.keyboard.press("Enter")
    expect(region).to_have_attribute("aria-pressed", "true")
    inputs = page.locator("#field-inputs li")
    want = sorted((e["input"]["id"], e["input_field"]) for e in detail["column_lineage"] if e["field"] == "region")
    assert want == sorted(
        [(dataset_id(seeded, "raw.customers"), "region"), (dataset_id(seeded, "raw.orders"), "customer_id")]
    )
    expect(inputs).to_have_count(2)
    got = inputs.evaluate_all("ls => ls.map(l => [Number(l.dataset.dataset), l.dataset.field])")
    assert sorted(tuple(g) for g in got) == want
    expect(page.locator('#field-inputs li[data-field="region"]')).to_contain_text("raw.customers.region")
    expect(page.locator('#field-inputs li[data-field="region"]')).to_contain_text("DIRECT / IDENTITY")
    expect(page.locator('#field-inputs li[data-field="customer_id"]')).to_contain_text("INDIRECT / JOIN")
    page.locator("#fields").screenshot(path=str(ARTIFACTS / "dataset-field-lineage.png"))
    # Another field replaces the list; its input opens by keyboard.
    amount = page.locator("#fields-table").get_by_role("button", name="amount")
    amount.focus()
    page.keyboard.press("Space")
    expect(region).to_have_attribute("aria-pressed", "false")
    expect(inputs).to_have_count(1)
    expect(inputs.first).to_contain_text("raw.orders.amount")
    expect(inputs.first).to_contain_text("DIRECT / TRANSFORMATION")
    inputs.first.get_by_role("link").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#detail-heading")).to_have_text("raw.orders")
    expect(page.locator("#fields-table tbody tr")).to_have_count(3)


def test_the_queries_that_wrote_and_read_it_with_their_sql(page: Page, seeded: Server) -> None:
    stage = dataset_id(seeded, "stage.orders_clean")
    page.goto(f"/ui/#/datasets/{stage}")
    section = page.locator("#dataset-runs")
    expect(section.locator(".query")).to_have_count(2)
    wrote, read = chain()[0], chain()[1]
    expect(section).to_contain_text(f"{wrote['job']['name']} wrote it")
    expect(section).to_contain_text(f"{read['job']['name']} read it")
    expect(section.locator("pre.sql").filter(has_text="CREATE TABLE stage.orders_clean")).to_have_text(
        wrote["job"]["facets"]["sql"]["query"]
    )
    page.set_viewport_size({"width": 1280, "height": 1400})
    page.screenshot(path=str(ARTIFACTS / "dataset-lineage-page.png"), full_page=True)


def label_box(view: Page, name: str) -> dict[str, Any]:
    node = view.locator("#lineage-svg a.node").filter(has=view.locator("title", has_text=f"{NS} · {name}"))
    return dict(
        node.evaluate(
            """n => ({ label: n.querySelector('text.node-name').textContent,
                       box: n.querySelector('rect').getBBox().width,
                       svg: n.ownerSVGElement.getBoundingClientRect().width,
                       canvas: document.querySelector('#lineage-canvas').clientWidth,
                       title: n.querySelector('title').textContent })"""
        )
    )


def test_boxes_take_the_room_the_panel_has(page: Page, seeded: Server) -> None:
    """Two columns in a wide panel: boxes as wide as the longest name needs, no name cut. In a
    700 px panel the same graph fits without scrolling, names cut in the middle, in full in the
    box's title and the text list; the picture follows the panel when it is resized."""
    hub = dataset_id(seeded, "hub.center")
    page.goto(f"/ui/#/datasets/{hub}")
    page.get_by_label("Depth").select_option("1")
    page.get_by_label("Direction").select_option("upstream")
    expect(page.locator("#lineage-svg a.node")).to_have_count(21)
    wide = label_box(page, LONG_NAME)
    assert wide["label"] == LONG_NAME, wide
    assert wide["box"] > 208  # the fixed width boxes had, which cut this name
    assert wide["svg"] <= wide["canvas"]
    page.locator("#lineage").screenshot(path=str(ARTIFACTS / "dataset-lineage-wide.png"))

    page.set_viewport_size({"width": 700, "height": 900})
    expect(page.locator("#lineage-svg text.node-name[data-elided]").first).to_be_visible()
    narrow = label_box(page, LONG_NAME)
    assert narrow["svg"] <= narrow["canvas"], narrow  # two columns fit a 700 px panel
    assert re.fullmatch(r"fan\.up_19_\w+…\w+_hold", narrow["label"]), narrow
    assert narrow["title"] == f"{NS} · {LONG_NAME}"
    expect(page.locator("#lineage-edges")).to_contain_text(f"{NS} · {LONG_NAME} → {NS} · hub.center")
    # Every label still inside its box.
    overflow = page.locator("#lineage-svg a.node").evaluate_all(
        """ns => ns.filter(n => { const r = n.querySelector('rect').getBBox();
              return [...n.querySelectorAll('text')].some(t => { const b = t.getBBox();
                return b.x < r.x || b.x + b.width > r.x + r.width; }); }).length"""
    )
    assert overflow == 0
    page.locator("#lineage").screenshot(path=str(ARTIFACTS / "dataset-lineage-700.png"))


def test_jobs_drawn_between_the_datasets_and_opened_by_keyboard(page: Page, seeded: Server) -> None:
    mart = dataset_id(seeded, "mart.sales_by_region")
    page.goto(f"/ui/#/datasets/{mart}")
    expect(page.locator("#lineage-svg a.node")).to_have_count(5)
    expect(page.locator("#lineage-svg a.node.job")).to_have_count(0)  # datasets only, unless asked
    page.get_by_label("Draw the jobs between them").check()
    graph = api(seeded, f"datasets/{mart}/lineage", direction="both", depth=2, limit=100, include="jobs")
    jobs = [n for n in graph["nodes"] if n["type"] == "job"]
    datasets = [n for n in graph["nodes"] if n["type"] == "dataset"]
    assert sorted(j["name"] for j in jobs) == ["query_1", "query_2", "query_3"]
    expect(page.locator("#lineage-svg a.node.job")).to_have_count(3)
    expect(page.locator("#lineage-svg a.node:not(.job)")).to_have_count(len(datasets))
    expect(page.locator("#lineage-status")).to_contain_text("5 datasets, 3 jobs")
    drawn_jobs = page.locator("#lineage-svg a.node.job").evaluate_all(
        "ns => ns.map(n => [Number(n.dataset.id), n.getAttribute('href')])"
    )
    assert sorted(drawn_jobs) == sorted([j["id"], f"#/jobs/{j['id']}"] for j in jobs)
    # Told apart by shape and by label: a rounded box with a gear and "job" under its name.
    job = page.locator("#lineage-svg a.node.job").filter(has_text="query_2")
    assert job.locator("rect").get_attribute("rx") == "22"
    assert page.locator(f'#lineage-svg a.node[data-id="{mart}"]:not(.job) rect').get_attribute("rx") == "6"
    expect(job.locator(".node-name")).to_have_text("⚙ query_2")
    expect(job.locator(".node-ns")).to_have_text("job · COMPLETE")
    # Each hop is dataset → job → dataset, left to right.
    x = {
        name: page.locator(sel).first.locator("rect").bounding_box()["x"]  # type: ignore[index]
        for name, sel in {
            "stage": f'#lineage-svg a.node:not(.job)[data-id="{dataset_id(seeded, "stage.orders_clean")}"]',
            "query_2": '#lineage-svg a.node.job:has-text("query_2")',
            "mart": f'#lineage-svg a.node:not(.job)[data-id="{mart}"]',
            "query_3": '#lineage-svg a.node.job:has-text("query_3")',
        }.items()
    }
    assert x["stage"] < x["query_2"] < x["mart"] < x["query_3"], x
    expect(page.locator("#lineage-edges")).to_contain_text(f"{NS} · stage.orders_clean is read by job {NS} · query_2")
    expect(page.locator("#lineage-edges")).to_contain_text(f"job {NS} · query_2 wrote {NS} · mart.sales_by_region")
    page.locator("#lineage").screenshot(path=str(ARTIFACTS / "dataset-lineage-jobs.png"))
    # Every box, dataset or job, in the Tab order; Enter on a job opens its page.
    page.get_by_label("Most datasets").focus()
    reached: list[tuple[str, int]] = []
    for _ in range(12):
        page.keyboard.press("Tab")
        node = page.evaluate(
            "document.activeElement.matches('#lineage-svg a.node')"
            " && [document.activeElement.dataset.type, Number(document.activeElement.dataset.id)]"
        )
        if not node:
            break
        reached.append(tuple(node))
    assert sorted(reached) == sorted((n["type"], n["id"]) for n in graph["nodes"])
    query_2 = next(j["id"] for j in jobs if j["name"] == "query_2")
    while page.evaluate("[document.activeElement.dataset.type, Number(document.activeElement.dataset.id)]") != [
        "job",
        query_2,
    ]:
        page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"#/jobs/{query_2}$"))
    expect(page.locator("#job-heading")).to_have_text("query_2")


def test_a_field_traced_through_the_hops(page: Page, seeded: Server) -> None:
    kpis = dataset_id(seeded, "report.kpis")
    page.goto(f"/ui/#/datasets/{kpis}")
    page.locator("#fields-table").get_by_role("button", name="total").click()
    rows = page.locator("#field-trace-edges tbody tr")
    graph = api(seeded, f"datasets/{kpis}/fields/total/lineage", direction="upstream", depth=3)
    nodes = {n["id"]: n for n in graph["nodes"]}
    dotted = {i: f"{n['name']}.{n['field']}" for i, n in nodes.items()}
    want = {(dotted[e["from"]], dotted[e["to"]]) for e in graph["edges"]}
    assert want == {
        ("mart.sales_by_region.total", "report.kpis.total"),
        ("stage.orders_clean.amount", "mart.sales_by_region.total"),
        ("raw.orders.amount", "stage.orders_clean.amount"),
    }
    expect(rows).to_have_count(3)
    got = rows.evaluate_all("rs => rs.map(r => [r.dataset.from, r.dataset.to, r.dataset.hop])")
    assert {(a, b) for a, b, _ in got} == want
    assert [int(h) for _, _, h in got] == [1, 2, 3]  # nearest hop first
    expect(rows.nth(0)).to_contain_text("DIRECT / AGGREGATION")
    expect(rows.nth(2)).to_contain_text("DIRECT / TRANSFORMATION")
    page.locator("#fields").screenshot(path=str(ARTIFACTS / "dataset-field-trace.png"))
    # Less depth, fewer hops.
    page.get_by_label("Hops to follow").select_option("1")
    expect(rows).to_have_count(1)
    # Downstream from the source: its field opens by keyboard, traced the other way.
    page.get_by_label("Hops to follow").select_option("3")
    expect(rows).to_have_count(3)
    link = rows.nth(2).locator("td").nth(1).get_by_role("link")
    expect(link).to_have_text("raw.orders.amount")
    link.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#detail-heading")).to_have_text("raw.orders")
    expect(page.locator('#fields-table button[data-field="amount"]')).to_have_attribute("aria-pressed", "true")
    page.get_by_label("Trace").select_option("downstream")
    expect(rows).to_have_count(3)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.to)") == [
        "stage.orders_clean.amount",
        "mart.sales_by_region.total",
        "report.kpis.total",
    ]


@pytest.mark.parametrize("field", [f for f in ODD_FIELDS if f not in (".", "..")])
def test_a_field_of_any_name_is_traced_as_itself(page: Page, seeded: Server, field: str) -> None:
    target = dataset_id(seeded, "odd.target")
    page.goto(f"/ui/#/datasets/{target}")
    page.locator("#fields-table button").nth(ODD_FIELDS.index(field)).click()
    rows = page.locator("#field-trace-edges tbody tr")
    expect(rows).to_have_count(1)
    assert rows.first.get_attribute("data-from") == f"odd.source.{field}"
    assert rows.first.get_attribute("data-to") == f"odd.target.{field}"
    # Its link opens the source with the same field traced.
    rows.first.locator("td").nth(1).get_by_role("link").click()
    expect(page.locator("#detail-heading")).to_have_text("odd.source")
    chosen = page.locator('#fields-table button[aria-pressed="true"]')
    expect(chosen).to_have_count(1)
    assert chosen.get_attribute("data-field") == field
    page.get_by_label("Trace").select_option("downstream")
    expect(rows).to_have_count(1)
    assert rows.first.get_attribute("data-to") == f"odd.target.{field}"


@pytest.mark.parametrize("field", [".", ".."])
def test_a_field_named_like_a_dot_segment_says_why_it_is_not_traced(page: Page, seeded: Server, field: str) -> None:
    """A browser removes "." and ".." (as %2E, %2E%2E too) from a URL's path: the view says so, and
    never shows what the shortened URL answers (the dataset's graph) as the field's lineage."""
    target = dataset_id(seeded, "odd.target")
    page.goto(f"/ui/#/datasets/{target}")
    assert page.evaluate("new URL('d/7/fields/%2E%2E/lineage', 'https://x/').pathname") == "/d/7/lineage"
    assert page.evaluate("new URL('d/7/fields/%2E/lineage', 'https://x/').pathname") == "/d/7/fields/lineage"
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.locator("#fields-table button").nth(ODD_FIELDS.index(field)).click()
    expect(page.locator("#field-trace-status")).to_contain_text(f'A field named "{field}" cannot be traced')
    expect(page.locator("#field-trace-edges")).to_have_count(0)
    assert [u for u in requests if "/fields/" in u or u.endswith("/lineage")] == []
    # Its one-hop inputs, from the dataset's own answer, are still listed.
    expect(page.locator("#field-inputs li")).to_have_count(1)
    expect(page.locator("#field-inputs li")).to_have_attribute("data-field", field)
