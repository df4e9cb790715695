// A dataset's lineage as a picture (SVG, laid out here: no third-party code) and as text, and
// the column lineage of one field. Data reaches the page through textContent only.

import { api, card, el, missing, newestLoads, plural, visibleName, visibleText } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
// Boxes are as wide as their longest label needs, within the panel's share per column and between
// minWidth and maxWidth; padX leaves room for the symlink bows drawn left of the first column.
const BOX = {
  width: 208, minWidth: 150, maxWidth: 520, height: 44, columnGap: 56, rowGap: 14, pad: 16, padX: 28, inset: 10,
};

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) node.append(child);
  return node;
}

// Shortens a label to what `room` holds in the font the browser uses, keeping its start and its
// end (names share prefixes; the table is at the end): the longest such cut, by bisection.
function elideMiddle(text, room) {
  const full = Array.from(text.textContent);
  if (text.getComputedTextLength() <= room) return;
  const keep = (n) => {
    const head = Math.ceil(n / 2);
    text.textContent = `${full.slice(0, head).join("")}…${full.slice(full.length - (n - head)).join("")}`;
  };
  let lo = 0;
  let hi = full.length - 1;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    keep(mid);
    if (text.getComputedTextLength() <= room) lo = mid;
    else hi = mid - 1;
  }
  keep(lo);
  text.dataset.elided = "true";
}

// Every label to its box (the full name is in the box's title, its link's name and the text list).
function fitLabels(root) {
  for (const node of root.querySelectorAll(".node")) {
    const room = Number(node.querySelector("rect").getAttribute("width")) - 2 * BOX.inset;
    for (const text of node.querySelectorAll("text")) elideMiddle(text, room - (node.classList.contains("job") ? 6 : 0));
  }
}

// With the jobs drawn, the gaps are narrower (twice the columns fit a panel) and a job's column
// takes what the datasets' leave, as much as its labels need, never less than `share` of theirs.
const JOBS = { share: 0.7, minWidth: 124, columnGap: 36 };

function gapOf(graph) {
  return graph.withJobs ? JOBS.columnGap : BOX.columnGap;
}

// The widest label of a graph, measured in the picture's fonts.
function widestLabel(canvas, graph) {
  const texts = graph.nodes.flatMap((node) => [
    svg("text", { class: "node-name", "data-type": node.type }, `${node.type === "job" ? "⚙ " : ""}${visibleText(node.name)}`),
    svg("text", { class: "node-ns", "data-type": node.type }, node.type === "job" ? jobLine(node) : visibleText(node.namespace)),
  ]);
  const probe = svg("svg", { class: "lineage-svg", width: 0, height: 0, "aria-hidden": "true" },
    svg("g", { class: "node" }, ...texts));
  canvas.append(probe);
  const of = (type) => Math.max(0, ...texts.filter((t) => t.dataset.type === type).map((t) => t.getComputedTextLength()));
  const widest = { dataset: of("dataset"), job: of("job") };
  probe.remove();
  return widest;
}

// The box width for a graph in a panel `room` pixels wide.
function boxWidth(graph, room, widest) {
  const columns = new Set(graph.nodes.map(column));
  const count = columns.size;
  const jobColumns = new Set(graph.nodes.filter((n) => n.type === "job").map(column)).size;
  const shares = count - jobColumns + JOBS.share * jobColumns;
  const share = Math.floor((room - 2 * BOX.padX - (count - 1) * gapOf(graph)) / Math.max(shares, 1));
  return Math.max(BOX.minWidth, Math.min(BOX.maxWidth, Math.ceil(widest.dataset) + 2 * BOX.inset + 1, share));
}

// The job box width, given the datasets' `box`.
function jobBoxWidth(graph, room, widest, box) {
  if (!graph.withJobs) return box;
  const columns = new Set(graph.nodes.map(column));
  const jobColumns = new Set(graph.nodes.filter((n) => n.type === "job").map(column)).size;
  const left = Math.floor((room - 2 * BOX.padX - (columns.size - 1) * gapOf(graph)
    - (columns.size - jobColumns) * box) / Math.max(jobColumns, 1));
  const need = Math.ceil(widest.job) + 2 * BOX.inset + 7;
  return Math.max(JOBS.minWidth, Math.min(BOX.maxWidth, need, Math.max(left, Math.round(box * JOBS.share))));
}

// Column of a node: upstream to the left, downstream to the right, the dataset (and its aliases) at 0.
// With jobs, each hop is two columns: its jobs, then the datasets they reach.
function column(node) {
  const hop = node.type === "job" ? 2 * node.depth - 1 : node.depth * (node.spread || 1);
  if (node.side === "upstream") return -hop;
  if (node.side === "downstream") return hop;
  return 0;
}

// Datasets and jobs have ids of their own, which may be equal: the picture keys them by type.
// Edges `input` go from a dataset to a job, `output` from a job to a dataset.
function keyed(answer) {
  const withJobs = answer.nodes.some((n) => n.type === "job");
  const key = (type, id) => `${type === "job" ? "j" : "d"}${id}`;
  const nodes = answer.nodes.map((n) => ({ ...n, type: n.type || "dataset", key: key(n.type, n.id), spread: withJobs ? 2 : 1 }));
  const edges = answer.edges.map((e) => ({ ...e,
    fromKey: key(e.kind === "output" ? "job" : "dataset", e.from), toKey: key(e.kind === "input" ? "job" : "dataset", e.to) }));
  return { ...answer, nodes, edges, key: key("dataset", answer.id), withJobs };
}

// Edges that carry data from one column to the next (not symlinks).
const FLOW = new Set(["lineage", "input", "output"]);

function crossings(order, edges, colOf) {
  // Edges between adjacent columns cross when their ends are in opposite orders.
  let count = 0;
  const spans = edges.filter((e) => colOf.get(e.to) - colOf.get(e.from) === 1);
  for (let i = 0; i < spans.length; i += 1) {
    for (let j = i + 1; j < spans.length; j += 1) {
      const a = spans[i];
      const b = spans[j];
      if (colOf.get(a.from) !== colOf.get(b.from)) continue;
      const d1 = order.get(a.from) - order.get(b.from);
      const d2 = order.get(a.to) - order.get(b.to);
      if (d1 * d2 < 0) count += 1;
    }
  }
  return count;
}

// Layered layout: one column per hop, rows ordered by the barycenter of each node's neighbours in
// the column just swept, several sweeps each way, keeping the order with the fewest crossings.
export function layout(graph, width = BOX.width, jobWidth = width) {
  const colOf = new Map(graph.nodes.map((n) => [n.key, column(n)]));
  const lineage = graph.edges.filter((e) => FLOW.has(e.kind) && colOf.has(e.fromKey) && colOf.has(e.toKey))
    .map((e) => ({ from: e.fromKey, to: e.toKey }));
  const keys = [...new Set(colOf.values())].sort((a, b) => a - b);
  const columns = new Map(keys.map((k) => [k, []]));
  const byName = [...graph.nodes].sort((a, b) => (column(a) === 0 && column(b) === 0
    ? (b.side === "self" && b.key === graph.key) - (a.side === "self" && a.key === graph.key) : 0)
    || a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name) || a.id - b.id);
  for (const node of byName) columns.get(colOf.get(node.key)).push(node.key);
  const neighbours = new Map(graph.nodes.map((n) => [n.key, []]));
  for (const e of lineage) {
    neighbours.get(e.from).push(e.to);
    neighbours.get(e.to).push(e.from);
  }
  const order = new Map();
  const number = () => {
    for (const ids of columns.values()) ids.forEach((id, i) => order.set(id, i));
  };
  number();
  let best = { score: crossings(order, lineage, colOf), columns: new Map([...columns].map(([k, v]) => [k, [...v]])) };
  const sweep = (sequence) => {
    for (let i = 1; i < sequence.length; i += 1) {
      const fixed = sequence[i - 1];
      const ids = columns.get(sequence[i]);
      const centre = new Map(ids.map((id) => {
        const near = neighbours.get(id).filter((n) => colOf.get(n) === fixed);
        const value = near.length ? near.reduce((s, n) => s + order.get(n), 0) / near.length : order.get(id);
        return [id, value];
      }));
      ids.sort((a, b) => centre.get(a) - centre.get(b) || order.get(a) - order.get(b));
      ids.forEach((id, k) => order.set(id, k));
    }
  };
  for (let round = 0; round < 6 && best.score > 0; round += 1) {
    sweep(round % 2 === 0 ? keys : [...keys].reverse());
    const score = crossings(order, lineage, colOf);
    if (score < best.score) best = { score, columns: new Map([...columns].map(([k, v]) => [k, [...v]])) };
  }
  const tallest = Math.max(...[...best.columns.values()].map((ids) => ids.length));
  const height = BOX.pad * 2 + tallest * BOX.height + (tallest - 1) * BOX.rowGap;
  const positions = new Map();
  const gap = gapOf(graph);
  const jobColumns = new Set(graph.nodes.filter((n) => n.type === "job").map((n) => colOf.get(n.key)));
  let x = BOX.padX;
  keys.forEach((key) => {
    const ids = best.columns.get(key);
    const w = jobColumns.has(key) ? jobWidth : width;
    const used = ids.length * BOX.height + (ids.length - 1) * BOX.rowGap;
    const top = (height - used) / 2; // each column centred, so short columns sit beside the dataset
    ids.forEach((id, r) => positions.set(id, { x, y: top + r * (BOX.height + BOX.rowGap), w, column: key, row: r }));
    x += w + gap;
  });
  return {
    positions, width: x - gap + BOX.padX, height,
    crossings: best.score, order: keys.flatMap((k) => best.columns.get(k)),
  };
}

function edgePath(a, b, kind) {
  if (kind === "symlink" || a.column === b.column) {
    // Same column: a bow on the left side, so it never runs through the boxes between.
    const x = a.x;
    const y1 = a.y + BOX.height / 2;
    const y2 = b.y + BOX.height / 2;
    const bow = Math.min(BOX.padX - 4, 18 + Math.abs(y2 - y1) / 8);
    return `M${x} ${y1} C${x - bow} ${y1} ${x - bow} ${y2} ${x} ${y2}`;
  }
  const forward = b.x > a.x;
  const x1 = forward ? a.x + a.w : a.x;
  const x2 = forward ? b.x : b.x + b.w;
  const y1 = a.y + BOX.height / 2;
  const y2 = b.y + BOX.height / 2;
  const mid = (x1 + x2) / 2;
  return `M${x1} ${y1} C${mid} ${y1} ${mid} ${y2} ${x2} ${y2}`;
}

function label(node) {
  return `${node.type === "job" ? "job " : ""}${visibleText(node.namespace)} · ${visibleText(node.name)}`;
}

// A job's second line: what it is and how its latest run ended (its namespace is in its title).
function jobLine(node) {
  return `job · ${node.latest_run?.state || "no run"}`;
}

function picture(graph, box, jobBox) {
  const { positions, width, height, order, crossings: crossed } = layout(graph, box, jobBox);
  const byKey = new Map(graph.nodes.map((n) => [n.key, n]));
  const root = svg("svg", {
    id: "lineage-svg", class: "lineage-svg", "data-box-width": box, width, height, "data-crossings": crossed, viewBox: `0 0 ${width} ${height}`, role: "group",
    "aria-label": `Lineage: ${counts(graph)}`,
  });
  root.append(svg("defs", {}, svg("marker", {
    id: "lineage-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7",
    orient: "auto-start-reverse",
  }, svg("path", { d: "M0 0 L10 5 L0 10 z", class: "arrow" }))));
  const edges = svg("g", { class: "edges", "aria-hidden": "true" });
  for (const e of graph.edges) {
    const a = positions.get(e.fromKey);
    const b = positions.get(e.toKey);
    if (!a || !b) continue;
    const path = svg("path", { d: edgePath(a, b, e.kind), class: `edge ${e.kind}`, "data-from": e.from, "data-to": e.to });
    if (FLOW.has(e.kind)) path.setAttribute("marker-end", "url(#lineage-arrow)");
    edges.append(path);
  }
  root.append(edges);
  const nodes = svg("g", { class: "nodes" });
  for (const key of order) { // column by column, top to bottom: the Tab order follows the picture
    const node = byKey.get(key);
    const p = positions.get(key);
    const current = node.key === graph.key;
    const job = node.type === "job";
    const state = job ? ` ${String(node.latest_run?.state || "none").toLowerCase()}` : "";
    const link = svg("a", {
      href: job ? `#/jobs/${node.id}` : `#/datasets/${node.id}`,
      class: job ? `node job ${node.side}${state}` : `node ${node.side}${current ? " current" : ""} ${node.kind}`,
      "data-id": node.id, "data-type": node.type,
      "aria-label": `${label(node)}${current ? " (this dataset)" : ""}${job && node.latest_run ? `, latest run ${node.latest_run.state}` : ""}`,
    });
    if (current) link.setAttribute("aria-current", "page");
    // A job is a pill with a gear before its name, a dataset a box: told apart by shape and by label.
    link.append(
      svg("title", {}, label(node)),
      svg("rect", { x: p.x, y: p.y, width: p.w, height: BOX.height, rx: job ? BOX.height / 2 : 6 }),
      svg("text", { x: p.x + BOX.inset + (job ? 6 : 0), y: p.y + 18, class: "node-name" },
        `${job ? "⚙ " : ""}${visibleText(node.name)}`),
      svg("text", { x: p.x + BOX.inset + (job ? 6 : 0), y: p.y + 35, class: "node-ns" },
        job ? jobLine(node) : visibleText(node.namespace)),
    );
    nodes.append(link);
  }
  root.append(nodes);
  return root;
}

function counts(graph) {
  const jobs = graph.nodes.filter((n) => n.type === "job").length;
  return [plural(graph.nodes.length - jobs, "dataset"), ...(graph.withJobs ? [plural(jobs, "job")] : []),
    plural(graph.edges.length, "edge")].join(", ");
}

// The same graph as sentences, for screen readers (the picture's boxes are links, its lines are not).
function edgeList(graph) {
  const byKey = new Map(graph.nodes.map((n) => [n.key, n]));
  const items = graph.edges.filter((e) => byKey.has(e.fromKey) && byKey.has(e.toKey)).map((e) => {
    const from = label(byKey.get(e.fromKey));
    const to = label(byKey.get(e.toKey));
    const text = {
      symlink: () => `${from} is also named ${to} (symlink${e.type ? `, ${visibleText(e.type)}` : ""})`,
      input: () => `${from} is read by ${to}`,
      output: () => `${from} wrote ${to}`,
    }[e.kind]?.() ?? `${from} → ${to} (${plural(e.jobs ?? 1, "job")})`;
    return el("li", { "data-from": e.from, "data-to": e.to, "data-kind": e.kind }, text);
  });
  return el("div", { class: "visually-hidden" },
    el("h4", {}, "Lineage as a list of edges"),
    items.length ? el("ul", { id: "lineage-edges" }, ...items) : el("p", { id: "lineage-edges" }, "No edges."));
}

export function lineageSection(dataset) {
  const status = el("p", { class: "status", id: "lineage-status", role: "status", "aria-live": "polite" });
  const canvas = el("div", { class: "lineage-canvas", id: "lineage-canvas" });
  const text = el("div", { id: "lineage-text" });
  const direction = el("select", { id: "lineage-direction", name: "direction" },
    el("option", { value: "both" }, "Upstream and downstream"),
    el("option", { value: "upstream" }, "Upstream only"),
    el("option", { value: "downstream" }, "Downstream only"));
  const depth = el("select", { id: "lineage-depth", name: "depth" },
    ...[1, 2, 3, 4, 5].map((d) => el("option", { value: String(d) }, plural(d, "hop"))));
  depth.value = "2";
  const limit = el("select", { id: "lineage-limit", name: "limit" },
    ...[25, 50, 100, 200].map((n) => el("option", { value: String(n) }, String(n))));
  limit.value = "100";
  const jobs = el("input", { type: "checkbox", id: "lineage-jobs", name: "include" });
  jobs.checked = lineageSection.withJobs === true; // as last chosen, from one dataset to the next
  const fetchGraph = newestLoads();
  // Drawn again when the panel's width changes the boxes' (Cockpit's panel, a window resized).
  let shown = null;
  const draw = () => {
    if (!shown || !canvas.isConnected) return;
    const box = boxWidth(shown.graph, canvas.clientWidth, shown.widest);
    const jobBox = jobBoxWidth(shown.graph, canvas.clientWidth, shown.widest, box);
    if (`${box}/${jobBox}` === shown.box) return;
    shown.box = `${box}/${jobBox}`;
    canvas.replaceChildren(picture(shown.graph, box, jobBox));
    fitLabels(canvas);
  };
  // After the observer's turn: a redraw resizes the canvas, which must not notify it again in it.
  new ResizeObserver(() => requestAnimationFrame(draw)).observe(canvas);
  const load = async () => {
    const url = api(`datasets/${encodeURIComponent(dataset.id)}/lineage`);
    url.searchParams.set("direction", direction.value);
    url.searchParams.set("depth", depth.value);
    url.searchParams.set("limit", limit.value);
    if (jobs.checked) url.searchParams.set("include", "jobs");
    const answer = await fetchGraph(url, status, "Loading lineage…", () => {
      shown = null;
      canvas.replaceChildren();
      text.replaceChildren();
    });
    if (answer === undefined) return;
    const graph = keyed(answer);
    const others = graph.nodes.filter((n) => n.side !== "self").length;
    status.replaceChildren(others === 0 ? "No lineage in this direction." : `${counts(graph)}.`);
    if (graph.truncated) {
      status.append(" ", el("strong", { class: "truncated", id: "lineage-truncated" },
        `Truncated: there is more lineage than shown; lower the depth, pick one direction or allow more datasets.`));
    }
    shown = { graph, widest: widestLabel(canvas, graph), box: "" };
    draw();
    text.replaceChildren(edgeList(graph));
  };
  direction.addEventListener("change", load);
  depth.addEventListener("change", load);
  limit.addEventListener("change", load);
  jobs.addEventListener("change", () => {
    lineageSection.withJobs = jobs.checked;
    load();
  });
  const section = el("section", { class: "detail-card", id: "lineage", "aria-labelledby": "lineage-heading" },
    el("h3", { id: "lineage-heading" }, "Lineage"),
    el("div", { class: "filters lineage-controls" },
      el("div", { class: "field check" }, el("label", { for: "lineage-jobs" }, jobs, " Draw the jobs between them")),
      el("div", { class: "field" }, el("label", { for: "lineage-direction" }, "Direction"), direction),
      el("div", { class: "field" }, el("label", { for: "lineage-depth" }, "Depth"), depth),
      el("div", { class: "field" }, el("label", { for: "lineage-limit" }, "Most datasets"), limit)),
    el("p", { class: "muted legend" }, "Upstream on the left, downstream on the right; dashed lines join names of the "
      + "same data (symlinks). Each box opens its dataset; with the jobs drawn, each rounded ⚙ box opens its job."),
    status, canvas, text);
  load();
  return section;
}

function transformation(edge) {
  const parts = [edge.transformation_type, edge.transformation_subtype].filter(Boolean);
  return parts.length ? parts.join(" / ") : "transformation not given";
}

// A browser's URL parser removes a path segment "." or ".." even as "%2E" or "%2E%2E" (they are
// dot segments to it), so no URL it fetches can name such a field in the path: asking anyway
// would fetch another resource (…/fields/%2E%2E/lineage is …/lineage, the dataset's graph).
const DOT_SEGMENT = /^\.{1,2}$/;

function fieldRef(node) {
  return el("span", { class: "field-ref" },
    el("a", { href: `#/datasets/${node.dataset_id}/fields/${encodeURIComponent(node.field)}`,
      "data-id": node.dataset_id, "data-field": node.field }, visibleName(node.name), ".", visibleName(node.field)),
    el("span", { class: "ref-ns" }, visibleName(node.namespace)));
}

// One row per edge of the field's lineage, nearest hop first: the field it comes from, how, the
// field it goes to.
function traceTable(graph) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const edges = graph.edges.filter((e) => byId.has(e.from) && byId.has(e.to)).map((e) => {
    const from = byId.get(e.from);
    const to = byId.get(e.to);
    const far = from.depth >= to.depth ? from : to;
    return { edge: e, from, to, hop: far.depth, side: far.side };
  });
  const sides = { upstream: 0, self: 1, downstream: 2 };
  edges.sort((a, b) => sides[a.side] - sides[b.side] || a.hop - b.hop);
  if (edges.length === 0) return el("p", { class: "muted", id: "field-trace-edges" }, "No field lineage in this direction.");
  const how = ({ edge }) => (edge.kind === "symlink" ? el("span", { class: "badge symlink" }, "same data (symlink)")
    : el("span", { class: "badge" }, edge.transformation
      ? transformation({ transformation_type: edge.transformation.type, transformation_subtype: edge.transformation.subtype })
      : "transformation not given"));
  const head = [["Hop", "col-hop"], ["From field", "col-lead"], ["How", "col-how"], ["To field", "col-lead"]];
  return el("div", { class: "table-wrap" }, el("table", { id: "field-trace-edges", class: "list" },
    el("thead", {}, el("tr", {}, ...head.map(([title, cls]) => el("th", { scope: "col", class: cls }, title)))),
    el("tbody", {}, ...edges.map((item) => el("tr", {
      "data-kind": item.edge.kind, "data-side": item.side, "data-hop": item.hop,
      "data-from": `${item.from.name}.${item.from.field}`, "data-to": `${item.to.name}.${item.to.field}`,
    },
    el("td", {}, `${item.side === "downstream" ? "↓" : "↑"} ${item.hop}`),
    el("td", { class: "ns" }, fieldRef(item.from)),
    el("td", {}, how(item)),
    el("td", { class: "ns" }, fieldRef(item.to)))))));
}

// A chosen field traced through the hops (GET …/fields/{field}/lineage), upstream, downstream or both.
function fieldTrace(dataset, name) {
  const direction = el("select", { id: "field-trace-direction" },
    el("option", { value: "upstream" }, "Where it comes from (upstream)"),
    el("option", { value: "downstream" }, "Where it goes (downstream)"),
    el("option", { value: "both" }, "Both ways"));
  const depth = el("select", { id: "field-trace-depth" },
    ...[1, 2, 3, 4, 5].map((d) => el("option", { value: String(d) }, plural(d, "hop"))));
  depth.value = "3";
  const status = el("p", { class: "status", id: "field-trace-status", role: "status", "aria-live": "polite" });
  const result = el("div", {});
  const fetchTrace = newestLoads();
  const load = async () => {
    if (DOT_SEGMENT.test(name)) {
      status.classList.add("error");
      status.textContent = `A field named "${name}" cannot be traced from a browser, which removes "${name}" from `
        + "every URL. Other clients can ask GET /api/v1/datasets/{id}/fields/{field}/lineage for it.";
      return;
    }
    const url = api(`datasets/${encodeURIComponent(dataset.id)}/fields/${encodeURIComponent(name)}/lineage`);
    url.searchParams.set("direction", direction.value);
    url.searchParams.set("depth", depth.value);
    const graph = await fetchTrace(url, status, "Tracing the field…", () => result.replaceChildren());
    if (graph === undefined) return;
    const fields = graph.nodes.filter((n) => n.side !== "self").length;
    status.replaceChildren(`${plural(fields, "other field")} within ${plural(Number(depth.value), "hop")}.`);
    if (graph.truncated) {
      status.append(" ", el("strong", { class: "truncated", id: "field-trace-truncated" },
        "Truncated: there is more lineage than shown; lower the depth or pick one direction."));
    }
    result.replaceChildren(traceTable(graph));
  };
  direction.addEventListener("change", load);
  depth.addEventListener("change", load);
  load();
  return el("div", { id: "field-trace", class: "field-trace" },
    el("h4", {}, "Traced through the hops"),
    el("div", { class: "filters lineage-controls" },
      el("div", { class: "field" }, el("label", { for: "field-trace-direction" }, "Trace"), direction),
      el("div", { class: "field" }, el("label", { for: "field-trace-depth" }, "Hops to follow"), depth)),
    status, result);
}

// The fields table, each field a button that shows the input fields it derives from, and traces
// it through the hops; `initial` is chosen when the page opens (a link to a field).
export function fieldsSection(dataset, initial = null) {
  const fields = dataset.fields || [];
  const lineage = dataset.column_lineage || [];
  const panel = el("div", { id: "field-lineage", class: "field-lineage", role: "region", "aria-live": "polite",
    "aria-label": "Column lineage of the chosen field" });
  const section = card("fields", "Fields", "Fields");
  if (fields.length === 0) {
    section.append(el("p", { class: "muted" }, "No event described its fields."));
    return section;
  }
  const sources = new Map();
  for (const edge of lineage) {
    if (edge.field === null) continue;
    const list = sources.get(edge.field) || [];
    list.push(edge);
    sources.set(edge.field, list);
  }
  const buttons = [];
  const choose = (name, button) => {
    for (const b of buttons) b.setAttribute("aria-pressed", String(b === button));
    const inputs = sources.get(name) || [];
    panel.replaceChildren(el("h4", {}, "Inputs of ", visibleName(name)));
    if (inputs.length === 0) {
      panel.append(el("p", { class: "muted" }, "No columnLineage facet names inputs for this field."),
        fieldTrace(dataset, name));
      return;
    }
    panel.append(el("ul", { class: "relations", id: "field-inputs" }, ...inputs.map((edge) => el("li", {
      "data-dataset": edge.input.id, "data-field": edge.input_field,
    },
    el("a", { href: `#/datasets/${edge.input.id}` }, visibleName(edge.input.name)), ".",
    el("code", {}, visibleName(edge.input_field)), " ", el("span", { class: "badge" }, transformation(edge)),
    " ", el("span", { class: "muted" }, visibleName(edge.input.namespace))))), fieldTrace(dataset, name));
  };
  const rows = fields.map((field) => {
    const name = String(field.name ?? "");
    const button = el("button", { type: "button", class: "field-button", "aria-pressed": "false",
      "aria-controls": "field-lineage", "data-field": name }, visibleName(name));
    button.addEventListener("click", () => choose(name, button));
    buttons.push(button);
    const derived = new Map((sources.get(name) || []).map(
      (edge) => [`${edge.input.name}\u0000${edge.input_field}`, [edge.input.name, edge.input_field]]));
    const inputs = [...derived.values()].flatMap(([table, column], i) => [
      ...(i ? [", "] : []), visibleName(table), ".", visibleName(column)]);
    return el("tr", { "data-field": name },
      el("td", { class: "name" }, button),
      el("td", { class: "ns" }, typeof field.type === "string" && field.type ? visibleName(field.type) : missing("no type")),
      el("td", { class: "ns" }, ...(inputs.length ? inputs : [missing("no input fields named")])));
  });
  const whole = lineage.filter((edge) => edge.field === null);
  section.append(
    el("p", { class: "muted" }, "Choose a field to see the input fields it is derived from, and to trace it "
      + "through the hops."),
    el("div", { class: "table-wrap" }, el("table", { id: "fields-table", class: "list" },
      el("thead", {}, el("tr", {}, ...[["Field", "col-field"], ["Type", "col-type"], ["Derived from", "col-lead"]].map(
        ([title, cls]) => el("th", { scope: "col", class: cls }, title)))),
      el("tbody", {}, ...rows))),
    panel);
  if (initial !== null) {
    const index = fields.findIndex((field) => String(field.name ?? "") === initial);
    if (index >= 0) {
      choose(initial, buttons[index]);
      requestAnimationFrame(() => section.scrollIntoView({ block: "start" }));
    } else {
      panel.replaceChildren(el("p", { class: "muted", id: "field-not-current" }, "This dataset's current fields have no ",
        visibleName(initial), "."), fieldTrace(dataset, initial));
    }
  }
  if (whole.length) {
    section.append(el("p", { class: "muted" }, "The whole dataset also depends on: ",
      [...new Set(whole.map((e) => `${visibleText(e.input.name)}.${visibleText(e.input_field)}`))].join(", ")));
  }
  return section;
}
