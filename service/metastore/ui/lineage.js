// A dataset's lineage as a picture (SVG, laid out here: no third-party code) and as text, and
// the column lineage of one field. Data reaches the page through textContent only.

import { api, el, getJSON, missing, plural, visibleName, visibleText } from "./dom.js";

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
function fitLabels(root, width) {
  for (const text of root.querySelectorAll(".node text")) elideMiddle(text, width - 2 * BOX.inset);
}

// The widest label of a graph, measured in the picture's fonts.
function widestLabel(canvas, graph) {
  const texts = graph.nodes.flatMap((node) => [
    svg("text", { class: "node-name" }, visibleText(node.name)),
    svg("text", { class: "node-ns" }, visibleText(node.namespace)),
  ]);
  const probe = svg("svg", { class: "lineage-svg", width: 0, height: 0, "aria-hidden": "true" },
    svg("g", { class: "node" }, ...texts));
  canvas.append(probe);
  const widest = Math.max(0, ...texts.map((t) => t.getComputedTextLength()));
  probe.remove();
  return widest;
}

// The box width for a graph in a panel `room` pixels wide.
function boxWidth(graph, room, widest) {
  const count = new Set(graph.nodes.map(column)).size;
  const share = Math.floor((room - 2 * BOX.padX - (count - 1) * BOX.columnGap) / Math.max(count, 1));
  return Math.max(BOX.minWidth, Math.min(BOX.maxWidth, Math.ceil(widest) + 2 * BOX.inset + 1, share));
}

// Column of a node: upstream to the left, downstream to the right, the dataset (and its aliases) at 0.
function column(node) {
  if (node.side === "upstream") return -node.depth;
  if (node.side === "downstream") return node.depth;
  return 0;
}

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
export function layout(graph, width = BOX.width) {
  const colOf = new Map(graph.nodes.map((n) => [n.id, column(n)]));
  const lineage = graph.edges.filter((e) => e.kind === "lineage" && colOf.has(e.from) && colOf.has(e.to));
  const keys = [...new Set(colOf.values())].sort((a, b) => a - b);
  const columns = new Map(keys.map((k) => [k, []]));
  const byName = [...graph.nodes].sort((a, b) => (column(a) === 0 && column(b) === 0
    ? (b.side === "self" && b.id === graph.id) - (a.side === "self" && a.id === graph.id) : 0)
    || a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name) || a.id - b.id);
  for (const node of byName) columns.get(colOf.get(node.id)).push(node.id);
  const neighbours = new Map(graph.nodes.map((n) => [n.id, []]));
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
  keys.forEach((key, c) => {
    const ids = best.columns.get(key);
    const used = ids.length * BOX.height + (ids.length - 1) * BOX.rowGap;
    const top = (height - used) / 2; // each column centred, so short columns sit beside the dataset
    ids.forEach((id, r) => positions.set(id, {
      x: BOX.padX + c * (width + BOX.columnGap), y: top + r * (BOX.height + BOX.rowGap), w: width, column: key, row: r,
    }));
  });
  return {
    positions, width: BOX.padX * 2 + keys.length * width + (keys.length - 1) * BOX.columnGap, height,
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
  return `${visibleText(node.namespace)} · ${visibleText(node.name)}`;
}

function picture(graph, box) {
  const { positions, width, height, order, crossings: crossed } = layout(graph, box);
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const root = svg("svg", {
    id: "lineage-svg", class: "lineage-svg", "data-box-width": box, width, height, "data-crossings": crossed, viewBox: `0 0 ${width} ${height}`, role: "group",
    "aria-label": `Lineage: ${plural(graph.nodes.length, "dataset")}, ${plural(graph.edges.length, "edge")}`,
  });
  root.append(svg("defs", {}, svg("marker", {
    id: "lineage-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7",
    orient: "auto-start-reverse",
  }, svg("path", { d: "M0 0 L10 5 L0 10 z", class: "arrow" }))));
  const edges = svg("g", { class: "edges", "aria-hidden": "true" });
  for (const e of graph.edges) {
    const a = positions.get(e.from);
    const b = positions.get(e.to);
    if (!a || !b) continue;
    const path = svg("path", { d: edgePath(a, b, e.kind), class: `edge ${e.kind}`, "data-from": e.from, "data-to": e.to });
    if (e.kind === "lineage") path.setAttribute("marker-end", "url(#lineage-arrow)");
    edges.append(path);
  }
  root.append(edges);
  const nodes = svg("g", { class: "nodes" });
  for (const id of order) { // column by column, top to bottom: the Tab order follows the picture
    const node = byId.get(id);
    const p = positions.get(id);
    const current = node.id === graph.id;
    const link = svg("a", {
      href: `#/datasets/${node.id}`, class: `node ${node.side}${current ? " current" : ""} ${node.kind}`,
      "data-id": node.id, "aria-label": `${label(node)}${current ? " (this dataset)" : ""}`,
    });
    if (current) link.setAttribute("aria-current", "page");
    link.append(
      svg("title", {}, label(node)),
      svg("rect", { x: p.x, y: p.y, width: p.w, height: BOX.height, rx: 6 }),
      svg("text", { x: p.x + BOX.inset, y: p.y + 18, class: "node-name" }, visibleText(node.name)),
      svg("text", { x: p.x + BOX.inset, y: p.y + 35, class: "node-ns" }, visibleText(node.namespace)),
    );
    nodes.append(link);
  }
  root.append(nodes);
  return root;
}

// The same graph as sentences, for screen readers (the picture's boxes are links, its lines are not).
function edgeList(graph) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const items = graph.edges.filter((e) => byId.has(e.from) && byId.has(e.to)).map((e) => {
    const from = label(byId.get(e.from));
    const to = label(byId.get(e.to));
    const text = e.kind === "symlink"
      ? `${from} is also named ${to} (symlink${e.type ? `, ${visibleText(e.type)}` : ""})`
      : `${from} → ${to} (${plural(e.jobs ?? 1, "job")})`;
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
  let token = 0;
  // Drawn again when the panel's width changes the boxes' (Cockpit's panel, a window resized).
  let shown = null;
  const draw = () => {
    if (!shown || !canvas.isConnected) return;
    const box = boxWidth(shown.graph, canvas.clientWidth, shown.widest);
    if (box === shown.box) return;
    shown.box = box;
    canvas.replaceChildren(picture(shown.graph, box));
    fitLabels(canvas, box);
  };
  // After the observer's turn: a redraw resizes the canvas, which must not notify it again in it.
  new ResizeObserver(() => requestAnimationFrame(draw)).observe(canvas);
  const load = async () => {
    const mine = ++token;
    const url = api(`datasets/${encodeURIComponent(dataset.id)}/lineage`);
    url.searchParams.set("direction", direction.value);
    url.searchParams.set("depth", depth.value);
    url.searchParams.set("limit", limit.value);
    status.classList.remove("error");
    status.textContent = "Loading lineage…";
    let graph;
    try {
      graph = await getJSON(url);
    } catch (error) {
      if (mine !== token) return;
      status.classList.add("error");
      status.textContent = error.message;
      shown = null;
      canvas.replaceChildren();
      text.replaceChildren();
      return;
    }
    if (mine !== token) return;
    const others = graph.nodes.filter((n) => n.side !== "self").length;
    status.replaceChildren(others === 0 ? "No lineage in this direction."
      : `${plural(graph.nodes.length, "dataset")}, ${plural(graph.edges.length, "edge")}.`);
    if (graph.truncated) {
      status.append(" ", el("strong", { class: "truncated", id: "lineage-truncated" },
        `Truncated: there is more lineage than shown; lower the depth, pick one direction or allow more datasets.`));
    }
    shown = { graph, widest: widestLabel(canvas, graph), box: 0 };
    draw();
    text.replaceChildren(edgeList(graph));
  };
  direction.addEventListener("change", load);
  depth.addEventListener("change", load);
  limit.addEventListener("change", load);
  const section = el("section", { class: "detail-card", id: "lineage", "aria-labelledby": "lineage-heading" },
    el("h3", { id: "lineage-heading" }, "Lineage"),
    el("div", { class: "filters lineage-controls" },
      el("div", { class: "field" }, el("label", { for: "lineage-direction" }, "Direction"), direction),
      el("div", { class: "field" }, el("label", { for: "lineage-depth" }, "Depth"), depth),
      el("div", { class: "field" }, el("label", { for: "lineage-limit" }, "Most datasets"), limit)),
    el("p", { class: "muted legend" }, "Upstream on the left, downstream on the right; dashed lines join names of the "
      + "same data (symlinks). Each box opens its dataset."),
    status, canvas, text);
  load();
  return section;
}

function transformation(edge) {
  const parts = [edge.transformation_type, edge.transformation_subtype].filter(Boolean);
  return parts.length ? parts.join(" / ") : "transformation not given";
}

// The fields table, each field a button that shows the input fields it derives from.
export function fieldsSection(dataset) {
  const fields = dataset.fields || [];
  const lineage = dataset.column_lineage || [];
  const panel = el("div", { id: "field-lineage", class: "field-lineage", role: "region", "aria-live": "polite",
    "aria-label": "Column lineage of the chosen field" });
  const section = el("section", { class: "detail-card", id: "fields", "aria-label": "Fields" }, el("h3", {}, "Fields"));
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
      panel.append(el("p", { class: "muted" }, "No columnLineage facet names inputs for this field."));
      return;
    }
    panel.append(el("ul", { class: "relations", id: "field-inputs" }, ...inputs.map((edge) => el("li", {
      "data-dataset": edge.input.id, "data-field": edge.input_field,
    },
    el("a", { href: `#/datasets/${edge.input.id}` }, visibleName(edge.input.name)), ".",
    el("code", {}, visibleName(edge.input_field)), " ", el("span", { class: "badge" }, transformation(edge)),
    " ", el("span", { class: "muted" }, visibleName(edge.input.namespace))))));
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
    el("p", { class: "muted" }, "Choose a field to see the input fields it is derived from."),
    el("div", { class: "table-wrap" }, el("table", { id: "fields-table", class: "list" },
      el("thead", {}, el("tr", {}, ...[["Field", "col-field"], ["Type", "col-type"], ["Derived from", "col-lead"]].map(
        ([title, cls]) => el("th", { scope: "col", class: cls }, title)))),
      el("tbody", {}, ...rows))),
    panel);
  if (whole.length) {
    section.append(el("p", { class: "muted" }, "The whole dataset also depends on: ",
      [...new Set(whole.map((e) => `${visibleText(e.input.name)}.${visibleText(e.input_field)}`))].join(", ")));
  }
  return section;
}
