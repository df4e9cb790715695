// The Queries page: the runs timeline (GET /runs), newest first, in keyset pages, filtered by
// state, Trino user, source, job namespace and time. Each run with its job, state, start,
// duration, user, and the datasets it read and wrote. Data reaches the page through textContent only.

import {
  $, api, datasetLink, el, fillNamespaces, foldedFacts, formatDuration, getJSON, keysetList, listStatus,
  missing, nameOrMissing, stateBadge, timeCell, timeText, visibleName,
} from "./dom.js";

const runsState = { cursors: [null], page: 0, loadToken: 0, wired: false, dataset: null };
const FAILED = new Set(["FAIL", "ABORT"]);

// A datetime-local value ("2024-03-01T10:00" or with seconds) is a UTC time here, as the labels say.
function utc(value) {
  if (!value) return "";
  return `${value.length === 16 ? `${value}:00` : value}Z`;
}

function runFilters() {
  const params = {};
  for (const [id, key] of [["run-state", "state"], ["run-user", "user"], ["run-source", "source"],
    ["run-namespace", "job_namespace"]]) {
    const value = $(`#${id}`).value.trim();
    if (value) params[key] = value;
  }
  for (const [id, key] of [["run-from", "from"], ["run-to", "to"]]) {
    const value = utc($(`#${id}`).value);
    if (value) params[key] = value;
  }
  if (runsState.dataset) params.dataset_id = runsState.dataset;
  params.limit = "50";
  return params;
}

function datasetsCell(datasets, emptyWords) {
  if (datasets.length === 0) return el("td", { class: "io" }, missing(emptyWords));
  return el("td", { class: "io" }, el("ul", { class: "io-list" }, ...datasets.map((d) => el("li", {}, datasetLink(d)))));
}

function runRow(run) {
  const failed = FAILED.has(run.state);
  const lead = el("td", { class: "name" },
    el("a", { href: `#/jobs/${run.job.id}`, class: "job-link" }, visibleName(run.job.name)),
    el("div", { class: "ref-ns" }, visibleName(run.job.namespace)),
    ...(failed && run.error_message ? [el("div", { class: "error-text run-error" }, run.error_message)] : []),
    foldedFacts([
      ["Started", timeText(run.started_at ?? run.first_event_time), "wide"],
      ["Duration", formatDuration(run.duration_s), "narrow"],
      ["User", nameOrMissing(run.trino_user, "no user"), "narrow"],
    ]));
  const row = el("tr", { "data-run": run.run_id, "data-state": run.state, "data-job": run.job.name,
    class: failed ? "failed" : "" },
  lead,
  el("td", {}, stateBadge(run.state)),
  timeCell(run.started_at ?? run.first_event_time, "fold-wide"),
  el("td", { class: "num fold-narrow" }, formatDuration(run.duration_s)),
  el("td", { class: "user fold-narrow" }, nameOrMissing(run.trino_user, "no user")),
  datasetsCell(run.inputs, "read no dataset"),
  datasetsCell(run.outputs, "wrote no dataset"));
  if (run.datasets_truncated) {
    row.lastChild.append(el("p", { class: "muted" }, "and more (over 100)"));
  }
  return row;
}

const setRunsStatus = listStatus("#queries-status", "#queries");

function showRuns(page) {
  const body = $("#queries tbody");
  if (page.runs.length === 0) {
    // A rare combination of filters may give an empty page that is not the last one.
    const text = page.next_cursor ? "None on this page; older queries may match: see the next page."
      : runsState.page === 0 ? "No queries match these filters." : "No more queries.";
    body.replaceChildren(el("tr", {}, el("td", { colspan: "7", class: "empty" }, text)));
    setRunsStatus(runsState.page === 0 && !page.next_cursor ? "No queries match." : "");
  } else {
    body.replaceChildren(...page.runs.map(runRow));
    const failed = page.runs.filter((run) => FAILED.has(run.state)).length;
    const count = page.runs.length === 1 ? "1 query" : `${page.runs.length} queries`;
    setRunsStatus(`Showing ${count}, newest first${failed ? `, ${failed} failed` : ""}`
      + `${page.next_cursor ? "" : " (last page)"}.`);
  }
}

const runsList = keysetList(runsState, {
  path: "runs", params: runFilters, table: "#queries", pager: "queries-", status: setRunsStatus,
  loading: "Loading queries…", show: showRuns,
});

// #/queries/dataset/12: only the runs that read or wrote that dataset (or one of its symlink
// aliases), said above the list with a way back to all.
async function showDatasetFilter() {
  const note = $("#queries-dataset");
  const id = runsState.dataset;
  if (!id) {
    note.hidden = true;
    note.replaceChildren();
    return;
  }
  note.hidden = false;
  note.replaceChildren("Only the queries that read or wrote this dataset. ", el("a", { href: "#/queries" }, "Show all"));
  let dataset;
  try {
    dataset = await getJSON(api(`datasets/${encodeURIComponent(id)}?events_limit=0`));
  } catch {
    return; // the list says what went wrong
  }
  if (runsState.dataset !== id) return;
  note.replaceChildren("Only the queries that read or wrote ", datasetLink(dataset), " (or another name of it). ",
    el("a", { href: "#/queries" }, "Show all"));
}

function wire() {
  if (runsState.wired) return;
  runsState.wired = true;
  runsList.wire({
    form: "#queries-filters", typed: ["#run-user", "#run-source"],
    chosen: ["#run-state", "#run-namespace", "#run-from", "#run-to"],
  });
  fillNamespaces($("#run-namespace"), "jobs");
  runsList.restart();
}

export const queryPages = [
  {
    pattern: /^#\/queries(?:\/dataset\/(\d+))?$/, sections: ["#queries-view"], nav: "queries", heading: "Queries",
    home: "#/queries", subtitle: "Which queries ran, by whom, what they read and wrote, and which failed: newest first.",
    title: "Queries",
    open(match) {
      const dataset = match[1] || null;
      const changed = dataset !== runsState.dataset;
      runsState.dataset = dataset;
      showDatasetFilter();
      if (runsState.wired && changed) runsList.restart();
      wire();
    },
  },
];
