// The datasets view: plain ES modules, no build step, no third-party code.
// Data only ever reaches the page through textContent, never as HTML.

import { datasetRunsSection, routeJobs } from "./jobs.js";
import { fieldsSection, lineageSection } from "./lineage.js";

export const api = (path) => new URL(`../api/v1/${path}`, window.location.href);
export const $ = (selector) => document.querySelector(selector);

const state = { cursors: [null], page: 0, lastFocus: null, loadToken: 0 };

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// Names are kept as sent (they are identifiers), so two datasets may differ only by what a
// person cannot see: an invisible or bidi control character, another kind of space, or the NFD
// form of an NFC name. Such code points are drawn as markers, e.g. ⟨U+200B⟩, in a style of their
// own; a name not in NFC also shows its combining and compatibility code points and a
// ⟨not NFC⟩ mark. A literal ⟨ is a marker too, so no name can imitate one: two different names
// never render as the same text.
const HIDDEN = /[\p{C}\p{Z}\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u2800\u27E8\u3164\uFE00-\uFE0F\uFFA0\u{E0100}-\u{E01EF}]/u;
const MARK = /\p{M}/u;
const CODE_POINT_NAMES = {
  0x0009: "CHARACTER TABULATION", 0x000a: "LINE FEED", 0x000d: "CARRIAGE RETURN", 0x0020: "SPACE",
  0x00a0: "NO-BREAK SPACE", 0x00ad: "SOFT HYPHEN", 0x034f: "COMBINING GRAPHEME JOINER",
  0x061c: "ARABIC LETTER MARK", 0x200b: "ZERO WIDTH SPACE", 0x200c: "ZERO WIDTH NON-JOINER",
  0x200d: "ZERO WIDTH JOINER", 0x200e: "LEFT-TO-RIGHT MARK", 0x200f: "RIGHT-TO-LEFT MARK",
  0x202a: "LEFT-TO-RIGHT EMBEDDING", 0x202b: "RIGHT-TO-LEFT EMBEDDING", 0x202c: "POP DIRECTIONAL FORMATTING",
  0x202d: "LEFT-TO-RIGHT OVERRIDE", 0x202e: "RIGHT-TO-LEFT OVERRIDE", 0x2060: "WORD JOINER",
  0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
  0x2069: "POP DIRECTIONAL ISOLATE", 0x27e8: "MATHEMATICAL LEFT ANGLE BRACKET",
  0xfeff: "ZERO WIDTH NO-BREAK SPACE (BYTE ORDER MARK)",
};

function codePoint(ch) {
  return `U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

// [{text}, {marker, title, keep}] for a name: keep is true where the glyph stays before its marker.
function nameParts(value) {
  const text = String(value);
  const chars = Array.from(text);
  const notNfc = text.normalize("NFC") !== text;
  const parts = [];
  chars.forEach((ch, i) => {
    const edgeSpace = ch === " " && (i === 0 || i === chars.length - 1);
    const hidden = edgeSpace || (ch !== " " && HIDDEN.test(ch));
    const unnormal = !hidden && notNfc && (MARK.test(ch) || ch.normalize("NFC") !== ch);
    if (!hidden && !unnormal) {
      const last = parts[parts.length - 1];
      if (last && last.text !== undefined) last.text += ch;
      else parts.push({ text: ch });
      return;
    }
    const name = CODE_POINT_NAMES[ch.codePointAt(0)];
    const what = hidden ? "invisible, control or bidi character" : "not in NFC form";
    if (unnormal) parts.push({ text: ch });
    parts.push({ marker: `⟨${codePoint(ch)}⟩`, title: `${codePoint(ch)}${name ? ` ${name}` : ""}: ${what}` });
  });
  if (notNfc) parts.push({ nfc: "⟨not NFC⟩" });
  return parts;
}

// A name as elements: text, and markers in their own style (a span isolated from the bidi
// order around it).
export function visibleName(value) {
  const node = el("span", { class: "name-text" });
  for (const part of nameParts(value)) {
    if (part.text !== undefined) node.append(part.text);
    else if (part.marker) node.append(el("span", { class: "cp", title: part.title }, part.marker));
    else node.append(el("span", { class: "cp nfc", title: "Not in Unicode normalization form NFC: the same "
      + "letters may be stored under another name in NFC" }, part.nfc));
  }
  return node;
}

// The same as plain text, where elements cannot go (options, the window title).
export function visibleText(value) {
  return nameParts(value).map((part) => part.text ?? part.marker ?? part.nfc).join("");
}

export function formatTime(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

export function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

export function timeCell(iso) {
  return el("td", { class: "time", title: iso || "" }, el("time", { datetime: iso || "" }, formatTime(iso)));
}

export async function getJSON(url) {
  let response;
  try {
    response = await fetch(url, { headers: { Accept: "application/json" } });
  } catch {
    throw new Error("The Metadata Store cannot be reached. Check the connection and retry.");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    // fall through: reported below
  }
  if (!response.ok) {
    const message = body?.error?.message || `The request failed (HTTP ${response.status}).`;
    throw new Error(message);
  }
  return body;
}

function setStatus(text, { error = false, busy = false, retry = null } = {}) {
  const status = $("#status");
  status.replaceChildren(text);
  status.classList.toggle("error", error);
  $("#datasets").setAttribute("aria-busy", busy ? "true" : "false");
  if (retry) status.append(" ", el("button", { type: "button", onclick: retry }, "Retry"));
}

function filters() {
  const form = new FormData($("#filters"));
  const params = {};
  for (const key of ["q", "scheme", "namespace", "kind", "limit"]) {
    const value = String(form.get(key) || "").trim();
    if (value) params[key] = value;
  }
  return params;
}

function kindBadge(dataset) {
  const badge = el("span", { class: `badge ${dataset.kind}` }, dataset.kind);
  if (dataset.kind === "symlink") badge.title = "Known only as a symlink identifier of another dataset";
  return badge;
}

function datasetRow(dataset) {
  const open = el("button", { type: "button", "data-id": dataset.id, onclick: () => openDetail(dataset.id) },
    visibleName(dataset.name));
  const name = el("td", { class: "name" }, open);
  if (dataset.symlink_relations > 0) {
    name.append(el("span", { class: "relation", title: "Has symlink relations: the same data under another name" },
      `⇄ ${dataset.symlink_relations}`));
  }
  return el("tr", { "data-namespace": dataset.namespace, "data-name": dataset.name },
    name,
    el("td", { class: "ns" }, visibleName(dataset.namespace)),
    el("td", {}, dataset.scheme ? visibleName(dataset.scheme) : el("span", { class: "muted" }, "none")),
    el("td", {}, kindBadge(dataset)),
    el("td", { class: "num" }, dataset.input_events),
    el("td", { class: "num" }, dataset.output_events),
    timeCell(dataset.first_seen),
    timeCell(dataset.last_seen));
}

async function loadPage() {
  const token = ++state.loadToken;
  const params = { ...filters() };
  const cursor = state.cursors[state.page];
  if (cursor) params.cursor = cursor;
  const url = api("datasets");
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  setStatus("Loading datasets…", { busy: true });
  let page;
  try {
    page = await getJSON(url);
  } catch (error) {
    if (token !== state.loadToken) return;
    $("#datasets tbody").replaceChildren();
    setStatus(error.message, { error: true, retry: loadPage });
    return;
  }
  if (token !== state.loadToken) return; // a newer search has started
  const body = $("#datasets tbody");
  if (page.datasets.length === 0) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: "8", class: "empty" },
      state.page === 0 ? "No datasets match these filters." : "No more datasets.")));
    setStatus(state.page === 0 ? "No datasets match." : "");
  } else {
    body.replaceChildren(...page.datasets.map(datasetRow));
    setStatus(`Showing ${page.datasets.length} datasets${page.next_cursor ? "" : " (last page)"}.`);
  }
  state.cursors[state.page + 1] = page.next_cursor;
  $("#next").disabled = !page.next_cursor;
  $("#prev").disabled = state.page === 0;
  $("#page-label").textContent = `Page ${state.page + 1}`;
}

function restart() {
  state.cursors = [null];
  state.page = 0;
  loadPage();
}

async function loadSummary() {
  try {
    const summary = await getJSON(api("datasets/summary"));
    const scheme = $("#scheme");
    for (const { scheme: name, datasets } of summary.schemes) {
      if (name) scheme.append(el("option", { value: name }, `${visibleText(name)} (${datasets})`));
    }
    const namespace = $("#namespace");
    for (const { namespace: name, datasets } of summary.namespaces) {
      namespace.append(el("option", { value: name }, `${visibleText(name)} (${datasets})`));
    }
  } catch {
    // The filters still work without counts; the list reports errors itself.
  }
}

function relationList(items, emptyText) {
  if (items.length === 0) return el("p", { class: "muted" }, emptyText);
  return el("ul", { class: "relations" }, ...items.map((item) => el("li", {},
    el("a", { href: `#/datasets/${item.id}` }, visibleName(item.namespace), " · ", visibleName(item.name)),
    " ", el("span", { class: "badge" }, item.type || "no type"),
    " ", kindBadge(item))));
}

function neighbourList(items, emptyText) {
  if (!items || items.length === 0) return el("p", { class: "muted" }, emptyText);
  return el("ul", { class: "relations" }, ...items.map((item) => el("li", {},
    el("a", { href: `#/datasets/${item.id}` }, visibleName(item.namespace), " · ", visibleName(item.name)),
    " ", el("span", { class: "badge" }, plural(item.jobs, "job")),
    " ", kindBadge(item))));
}

function eventsTable(events) {
  if (events.length === 0) return el("p", { class: "muted" }, "No events.");
  return el("div", { class: "table-wrap" }, el("table", { id: "events" },
    el("thead", {}, el("tr", {}, ...["Job", "Run", "Event", "Direction", "Event time"].map(
      (title) => el("th", { scope: "col" }, title)))),
    el("tbody", {}, ...events.map((event) => el("tr", {},
      el("td", { class: "ns" }, ...(event.job_name
        ? [visibleName(event.job_namespace), " · ", visibleName(event.job_name)] : ["(dataset event)"])),
      el("td", { class: "ns" }, event.run_id || ""),
      el("td", {}, event.event_type || event.event_kind),
      el("td", {}, { input: "read", output: "written", none: "declared" }[event.direction] || event.direction),
      timeCell(event.event_time))))));
}

async function openDetail(id) {
  state.lastFocus = document.activeElement;
  window.location.hash = `#/datasets/${id}`;
}

async function showDetail(id) {
  $("#list-view").hidden = true;
  const view = $("#detail-view");
  view.hidden = false;
  const detail = $("#detail");
  detail.replaceChildren(el("p", { role: "status" }, "Loading dataset…"));
  let dataset;
  try {
    dataset = await getJSON(api(`datasets/${encodeURIComponent(id)}`));
  } catch (error) {
    detail.replaceChildren(el("p", { class: "status error", role: "alert" }, error.message));
    view.focus();
    return;
  }
  document.title = `${visibleText(dataset.name)} · Metadata Store`;
  detail.replaceChildren(
    el("div", { class: "detail-card" },
      el("h2", { id: "detail-heading", tabindex: "-1" }, visibleName(dataset.name)),
      el("div", {}, kindBadge(dataset)),
      el("dl", { class: "props" },
        el("dt", {}, "Namespace"), el("dd", {}, visibleName(dataset.namespace)),
        el("dt", {}, "Scheme"), el("dd", {}, dataset.scheme || "none"),
        el("dt", {}, "Authority"), el("dd", {}, dataset.authority ? visibleName(dataset.authority) : "none"),
        el("dt", {}, "Read by"), el("dd", {}, plural(dataset.input_events, "event")),
        el("dt", {}, "Written by"), el("dd", {}, plural(dataset.output_events, "event")),
        el("dt", {}, "First seen"), el("dd", {}, formatTime(dataset.first_seen)),
        el("dt", {}, "Last seen"), el("dd", {}, formatTime(dataset.last_seen)))),
    lineageSection(dataset),
    fieldsSection(dataset),
    el("section", { class: "detail-card", id: "symlinks", "aria-label": "Symlinks" },
      el("h3", {}, "Symlinks: other names of this dataset"),
      relationList(dataset.symlinks, "This dataset names no symlinks.")),
    el("section", { class: "detail-card", id: "symlink-of", "aria-label": "Symlink of" },
      el("h3", {}, "Symlink of: datasets that give this one as another name"),
      relationList(dataset.symlink_of, "No dataset names this one as a symlink.")),
    el("section", { class: "detail-card", id: "upstream", "aria-label": "Upstream" },
      el("h3", {}, "Upstream: read by the jobs that wrote it"),
      neighbourList(dataset.upstream, "No job that wrote it read another dataset.")),
    el("section", { class: "detail-card", id: "downstream", "aria-label": "Downstream" },
      el("h3", {}, "Downstream: written by the jobs that read it"),
      neighbourList(dataset.downstream, "No job that read it wrote another dataset.")),
    el("section", { class: "detail-card", "aria-label": "Recent events" },
      el("h3", {}, "Recent events"), eventsTable(dataset.events)));
  $("#detail-heading").focus();
  detail.append(await datasetRunsSection(dataset.id));
}

function showList() {
  document.title = "Datasets · Metadata Store";
  $("#detail-view").hidden = true;
  $("#list-view").hidden = false;
  if (state.lastFocus && document.body.contains(state.lastFocus)) state.lastFocus.focus();
}

function route() {
  if (routeJobs(window.location.hash)) {
    $("#list-view").hidden = true;
    $("#detail-view").hidden = true;
    return;
  }
  const match = window.location.hash.match(/^#\/datasets\/(\d+)$/);
  if (match) showDetail(match[1]);
  else showList();
}

function debounce(fn, ms) {
  let timer;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}

// Live forwarding (METASTORE_FORWARD_URL): one line per downstream, refreshed every 10 s; hidden
// when nothing is forwarded. A failure to read the status is not the page's business: it stays as it was.
async function loadForwarding() {
  let status;
  try {
    status = await getJSON(api("forwarding"));
  } catch {
    return;
  }
  const footer = $("#forwarding");
  const lines = status.targets.map((t) => {
    const lag = Number(t.lag_seconds);
    const where = lag > 0 ? `${plural(Math.round(lag), "second")} behind` : "up to date";
    const error = t.last_error && lag > 0 ? ` · last error: ${t.last_error}` : "";
    return el("p", {}, `Forwarding to ${t.target}: ${where}, ${plural(t.sent, "event")} sent${error}`);
  });
  footer.replaceChildren(...lines);
  footer.hidden = lines.length === 0;
}

document.addEventListener("DOMContentLoaded", () => {
  $("#filters").addEventListener("submit", (event) => {
    event.preventDefault();
    restart();
  });
  $("#q").addEventListener("input", debounce(restart, 250));
  for (const id of ["#scheme", "#namespace", "#kind", "#limit"]) $(id).addEventListener("change", restart);
  $("#next").addEventListener("click", () => {
    state.page += 1;
    loadPage();
  });
  $("#prev").addEventListener("click", () => {
    state.page = Math.max(0, state.page - 1);
    loadPage();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("#detail-view").hidden) window.location.hash = "#/";
  });
  window.addEventListener("hashchange", route);
  loadSummary();
  restart();
  route();
  loadForwarding();
  setInterval(loadForwarding, 10000);
});
