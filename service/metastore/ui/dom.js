// Helpers every page of the view shares: elements, names as text, times, the JSON API. No page
// imports another page for these, so the modules form no cycle and app.js stays the entry point.
// Data only ever reaches the page through textContent, never as HTML.

// The API relative to this module (…/ui/dom.js → …/api/v1/), not to the page or a <base>: the
// view works under any path prefix a reverse proxy puts in front of the store.
const API = new URL("../api/v1/", import.meta.url);

export const api = (path) => new URL(path, API);
export const $ = (selector) => document.querySelector(selector);

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

// The window title: what the page shows, then the product, e.g. "orders · Datasets · Metadata Store".
export function setTitle(...parts) {
  document.title = [...parts.filter(Boolean), "Metadata Store"].join(" · ");
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

// [{text}, {marker, title}, {nfc}] for a name.
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

// Where a name may wrap: after a run of separators (`trino://host:8080`, `db.schema.table`,
// `/warehouse/t1`), never inside the parts between them (a port, a table name). A part longer
// than LONG_PART may also wrap after its underscores, so that only a part that long and without
// one is ever cut (by the CSS, at the edge of its column).
const SEPARATORS = /[./:@?&=,;]+/g;
const LONG_PART = 20;

function appendBreakable(node, text) {
  let at = 0;
  const piece = (end) => {
    const part = text.slice(at, end);
    if (Array.from(part).length <= LONG_PART) node.append(part);
    else part.split(/(?<=_)/).forEach((bit, i) => node.append(...(i ? [document.createElement("wbr"), bit] : [bit])));
  };
  for (const match of text.matchAll(SEPARATORS)) {
    const end = match.index + match[0].length;
    if (end >= text.length) break;
    piece(end);
    node.append(document.createElement("wbr"));
    at = end;
  }
  piece(text.length);
}

// A name as elements: text that wraps only at separators, and markers in their own style (a span
// isolated from the bidi order around it).
export function visibleName(value) {
  const node = el("span", { class: "name-text" });
  for (const part of nameParts(value)) {
    if (part.text !== undefined) appendBreakable(node, part.text);
    else if (part.marker) node.append(el("span", { class: "cp", title: part.title }, part.marker));
    else node.append(el("span", { class: "cp nfc", title: "Not in Unicode normalization form NFC: the same "
      + "letters may be stored under another name in NFC" }, part.nfc));
  }
  return node;
}

// The same as plain text, where elements cannot go (options, the window title, SVG labels).
export function visibleText(value) {
  return nameParts(value).map((part) => part.text ?? part.marker ?? part.nfc).join("");
}

// What an event did not send: a dash to the eye, words to a screen reader.
export function missing(words = "not given") {
  return el("span", { class: "missing" }, el("span", { "aria-hidden": "true" }, "—"),
    el("span", { class: "visually-hidden" }, words));
}

// A name, or the dash when there is none.
export function nameOrMissing(value, words) {
  return value === null || value === undefined || value === "" ? missing(words) : visibleName(value);
}

export function textOrMissing(value, words) {
  return value === null || value === undefined || value === "" ? missing(words) : String(value);
}

export function formatTime(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// A time as an element: the date and the clock may go on two lines in a narrow column.
export function timeText(iso) {
  if (!iso) return missing();
  const text = formatTime(iso);
  const node = el("time", { datetime: iso, title: iso });
  const space = text.indexOf(" ");
  if (space < 0) node.append(text);
  else node.append(el("span", { class: "date" }, text.slice(0, space)), " ", el("span", { class: "clock" }, text.slice(space + 1)));
  return node;
}

export function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

export function timeCell(iso, className = "") {
  return el("td", { class: `time ${className}`.trim() }, timeText(iso));
}

// A card of a detail page: a section that screen readers name `label`, its heading, its content
// (id null: a card nothing links to).
export function card(id, label, heading, ...content) {
  const attrs = id === null ? { class: "detail-card", "aria-label": label } : { class: "detail-card", id, "aria-label": label };
  return el("section", attrs, el("h3", {}, heading), ...content);
}

// Facts of columns a narrow panel hides, shown under the name instead: [label, value, level],
// level "wide" (hidden below 1100 px) or "narrow" (below 800 px), as the column's th says.
export function foldedFacts(facts) {
  return el("div", { class: "facts" }, ...facts.map(([label, value, level]) => el("div", { class: `fact ${level}` },
    el("span", { class: "fact-label" }, `${label}: `), value instanceof Node ? value : String(value))));
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

// Loads of one panel, one after another as its controls change: load(url, status, loading, cleared)
// says `loading` in the status line while it fetches, and gives the answer, or undefined when a
// newer load has started meanwhile or when it failed (the error is then in the status line and
// cleared() has emptied what the panel showed).
export function newestLoads() {
  let token = 0;
  return async (url, status, loading, cleared) => {
    const mine = ++token;
    status.classList.remove("error");
    status.textContent = loading;
    let answer;
    try {
      answer = await getJSON(url);
    } catch (error) {
      if (mine !== token) return undefined;
      status.classList.add("error");
      status.textContent = error.message;
      cleared();
      return undefined;
    }
    return mine === token ? answer : undefined;
  };
}

// A status line with an optional Retry button.
export function setStatus(status, text, { error = false, retry = null } = {}) {
  status.replaceChildren(text);
  status.classList.toggle("error", error);
  if (retry) status.append(" ", el("button", { type: "button", onclick: retry }, "Retry"));
}

// The status line of a list whose table says, by aria-busy, while a page of it is loading.
export function listStatus(statusSelector, tableSelector) {
  return (text, { error = false, busy = false, retry = null } = {}) => {
    setStatus($(statusSelector), text, { error, retry });
    $(tableSelector).setAttribute("aria-busy", busy ? "true" : "false");
  };
}

// A list read from `path` in keyset pages, as the Datasets, Jobs and Queries pages show theirs.
// `state` keeps the page shown, the cursor of each page seen and which load is the newest: only
// the newest shows its answer. params() gives the filters, status(text, options) the status line,
// show(answer) fills the table and the status line; the pager is #<pager>prev, #<pager>next and
// #<pager>page-label. wire() starts again from the first page when the filters' form is submitted,
// a `typed` field rests for 250 ms (one timer for them all) or a `chosen` one changes.
export function keysetList(state, { path, params, table, pager, status, loading, show }) {
  const load = async () => {
    const token = ++state.loadToken;
    const url = api(path);
    for (const [key, value] of Object.entries(params())) url.searchParams.set(key, value);
    const cursor = state.cursors[state.page];
    if (cursor) url.searchParams.set("cursor", cursor);
    status(loading, { busy: true });
    let answer;
    try {
      answer = await getJSON(url);
    } catch (error) {
      if (token !== state.loadToken) return;
      $(`${table} tbody`).replaceChildren();
      status(error.message, { error: true, retry: load });
      return;
    }
    if (token !== state.loadToken) return; // a newer search has started
    show(answer);
    state.cursors[state.page + 1] = answer.next_cursor;
    $(`#${pager}next`).disabled = !answer.next_cursor;
    $(`#${pager}prev`).disabled = state.page === 0;
    $(`#${pager}page-label`).textContent = `Page ${state.page + 1}`;
  };
  const restart = () => {
    state.cursors = [null];
    state.page = 0;
    load();
  };
  const wire = ({ form, typed, chosen }) => {
    $(form).addEventListener("submit", (event) => {
      event.preventDefault();
      restart();
    });
    const later = debounce(restart, 250);
    for (const id of typed) $(id).addEventListener("input", later);
    for (const id of chosen) $(id).addEventListener("change", restart);
    $(`#${pager}next`).addEventListener("click", () => {
      state.page += 1;
      load();
    });
    $(`#${pager}prev`).addEventListener("click", () => {
      state.page = Math.max(0, state.page - 1);
      load();
    });
  };
  return { restart, wire };
}

export function debounce(fn, ms) {
  let timer;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}

// A run's state as a badge; "FAIL" and "ABORT" in the error colours.
export function stateBadge(state) {
  return el("span", { class: `badge state ${String(state || "none").toLowerCase()}` }, state || "no run");
}

export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined) return missing();
  const s = Number(seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  const minutes = Math.floor(s / 60);
  return minutes < 120 ? `${minutes} min ${Math.round(s % 60)} s` : `${(minutes / 60).toFixed(1)} h`;
}

// A dataset as a link to its page: its name, and its namespace in a muted line (two datasets of
// the same name in two namespaces never look alike).
export function datasetLink(dataset) {
  return el("span", { class: "dataset-ref" },
    el("a", { href: `#/datasets/${dataset.id}`, "data-id": dataset.id }, visibleName(dataset.name)),
    el("span", { class: "ref-ns" }, visibleName(dataset.namespace)));
}

// GET /namespaces once per page load, shared by the filters that offer a namespace as a choice.
let namespaceList = null;

export function namespaces() {
  namespaceList ??= getJSON(api("namespaces")).catch((error) => {
    namespaceList = null; // tried again by the next page that asks
    throw error;
  });
  return namespaceList;
}

// Fills a <select> with the namespaces that have jobs ("jobs") or datasets ("datasets").
export async function fillNamespaces(select, kind) {
  let answer;
  try {
    answer = await namespaces();
  } catch {
    return; // the list still works without the choice; it reports errors itself
  }
  if (select.dataset.filled) return;
  select.dataset.filled = "true";
  const more = kind === "jobs" ? "more_jobs" : "more_datasets";
  for (const entry of answer.namespaces) {
    if (entry[kind] > 0) {
      select.append(el("option", { value: entry.namespace },
        `${visibleText(entry.namespace)} (${entry[kind]}${entry[more] ? "+" : ""})`));
    }
  }
}
