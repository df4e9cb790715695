// The datasets pages: the list (search, filters, keyset pages) and a dataset's page.

import {
  $, api, card, el, foldedFacts, formatTime, getJSON, keysetList, listStatus, missing, nameOrMissing, plural,
  setTitle, timeCell, timeText, visibleName, visibleText,
} from "./dom.js";
import { datasetRunsSection } from "./jobs.js";
import { fieldsSection, lineageSection } from "./lineage.js";

const state = { cursors: [null], page: 0, lastFocus: null, loadToken: 0, wired: false };

const setListStatus = listStatus("#status", "#datasets");

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
  name.append(foldedFacts([
    ["Scheme", nameOrMissing(dataset.scheme, "no scheme"), "narrow"],
    ["First seen", timeText(dataset.first_seen), "wide"],
    ["Last seen", timeText(dataset.last_seen), "wide"],
  ]));
  return el("tr", { "data-namespace": dataset.namespace, "data-name": dataset.name },
    name,
    el("td", { class: "ns" }, visibleName(dataset.namespace)),
    el("td", { class: "scheme fold-narrow" }, nameOrMissing(dataset.scheme, "no scheme")),
    el("td", {}, kindBadge(dataset)),
    el("td", { class: "num" }, dataset.input_events),
    el("td", { class: "num" }, dataset.output_events),
    timeCell(dataset.first_seen, "fold-wide"),
    timeCell(dataset.last_seen, "fold-wide"));
}

function showPage(page) {
  const body = $("#datasets tbody");
  if (page.datasets.length === 0) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: "8", class: "empty" },
      state.page === 0 ? "No datasets match these filters." : "No more datasets.")));
    setListStatus(state.page === 0 ? "No datasets match." : "");
  } else {
    body.replaceChildren(...page.datasets.map(datasetRow));
    setListStatus(`Showing ${page.datasets.length} datasets${page.next_cursor ? "" : " (last page)"}.`);
  }
}

const list = keysetList(state, {
  path: "datasets", params: filters, table: "#datasets", pager: "", status: setListStatus,
  loading: "Loading datasets…", show: showPage,
});

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

const DIRECTIONS = { input: "read", output: "written", none: "declared" };

function eventsTable(events) {
  if (events.length === 0) return el("p", { class: "muted" }, "No events.");
  const head = [["Job", "col-lead"], ["Run", "col-run"], ["Event", "col-event"], ["Direction", "col-direction"],
    ["Event time", "col-time fold-wide"]];
  return el("div", { class: "table-wrap" }, el("table", { id: "events", class: "list" },
    el("thead", {}, el("tr", {}, ...head.map(([title, cls]) => el("th", { scope: "col", class: cls }, title)))),
    el("tbody", {}, ...events.map((event) => el("tr", {},
      el("td", { class: "ns lead" },
        ...(event.job_name ? [visibleName(event.job_namespace), " · ", visibleName(event.job_name)] : ["(dataset event)"]),
        foldedFacts([["Event time", timeText(event.event_time), "wide"]])),
      el("td", { class: "ns" }, nameOrMissing(event.run_id, "no run")),
      el("td", {}, event.event_type || event.event_kind),
      el("td", {}, DIRECTIONS[event.direction] || event.direction),
      timeCell(event.event_time, "fold-wide"))))));
}

function openDetail(id) {
  state.lastFocus = document.activeElement;
  window.location.hash = `#/datasets/${id}`;
}

async function showDetail(id, field = null) {
  const hash = window.location.hash;
  const view = $("#detail-view");
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
  if (window.location.hash !== hash) return; // another page was opened meanwhile
  setTitle(visibleText(dataset.name), "Datasets");
  const time = (iso) => (iso ? formatTime(iso) : missing());
  detail.replaceChildren(
    el("div", { class: "detail-card" },
      el("h2", { id: "detail-heading", tabindex: "-1" }, visibleName(dataset.name)),
      el("div", {}, kindBadge(dataset)),
      el("dl", { class: "props" },
        el("dt", {}, "Namespace"), el("dd", {}, visibleName(dataset.namespace)),
        el("dt", {}, "Scheme"), el("dd", { id: "detail-scheme" }, nameOrMissing(dataset.scheme, "no scheme")),
        el("dt", {}, "Authority"), el("dd", { id: "detail-authority" }, nameOrMissing(dataset.authority, "no authority")),
        el("dt", {}, "Read by"), el("dd", {}, plural(dataset.input_events, "event")),
        el("dt", {}, "Written by"), el("dd", {}, plural(dataset.output_events, "event")),
        el("dt", {}, "First seen"), el("dd", {}, time(dataset.first_seen)),
        el("dt", {}, "Last seen"), el("dd", {}, time(dataset.last_seen)))),
    lineageSection(dataset),
    fieldsSection(dataset, field),
    card("symlinks", "Symlinks", "Symlinks: other names of this dataset",
      relationList(dataset.symlinks, "This dataset names no symlinks.")),
    card("symlink-of", "Symlink of", "Symlink of: datasets that give this one as another name",
      relationList(dataset.symlink_of, "No dataset names this one as a symlink.")),
    card("upstream", "Upstream", "Upstream: read by the jobs that wrote it",
      neighbourList(dataset.upstream, "No job that wrote it read another dataset.")),
    card("downstream", "Downstream", "Downstream: written by the jobs that read it",
      neighbourList(dataset.downstream, "No job that read it wrote another dataset.")),
    card(null, "Recent events", "Recent events", eventsTable(dataset.events)));
  $("#detail-heading").focus();
  detail.append(await datasetRunsSection(dataset.id));
}

function wire() {
  if (state.wired) return;
  state.wired = true;
  list.wire({ form: "#filters", typed: ["#q"], chosen: ["#scheme", "#namespace", "#kind", "#limit"] });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("#detail-view").hidden) window.location.hash = "#/";
  });
  loadSummary();
  list.restart();
}

const HEADING = "Datasets";
const SUBTITLE = "Every dataset that OpenLineage events mention, as the Metadata Store received them.";

export const datasetPages = [
  {
    pattern: /^#\/(datasets)?$/, sections: ["#list-view"], nav: "datasets", heading: HEADING, home: "#/",
    subtitle: SUBTITLE, title: "Datasets",
    open() {
      wire();
      if (state.lastFocus && document.body.contains(state.lastFocus)) state.lastFocus.focus();
    },
  },
  {
    // #/datasets/12/fields/<field, percent-encoded>: the dataset with that field traced.
    pattern: /^#\/datasets\/(\d+)(?:\/fields\/(.+))?$/, sections: ["#detail-view"], nav: "datasets", heading: HEADING,
    home: "#/", subtitle: SUBTITLE, title: "Datasets",
    open(match) {
      wire(); // the list behind it, for the way back
      let field = null;
      try {
        field = match[2] === undefined ? null : decodeURIComponent(match[2]);
      } catch {
        field = null; // not a field name this view wrote: the dataset alone
      }
      showDetail(match[1], field);
    },
  },
];
