// The jobs pages: jobs with their latest run, and a job's page with the datasets it read and
// wrote, its runs and SQL.
// No third-party code; data reaches the page through textContent only.

import {
  $, api, card, datasetLink, el, fillNamespaces, foldedFacts, formatDuration, formatTime, getJSON, keysetList,
  missing, nameOrMissing, plural, setStatus, setTitle, stateBadge, textOrMissing, timeCell, timeText, visibleName,
  visibleText,
} from "./dom.js";

const jobsState = { cursors: [null], page: 0, loadToken: 0, lastFocus: null, wired: false };

function jobType(job) {
  return [job.integration, job.job_type, job.processing_type].filter(Boolean).join(" · ");
}

function jobFilters() {
  const params = {};
  for (const [id, key] of [["job-q", "q"], ["job-namespace", "namespace"], ["job-state", "state"],
    ["job-user", "user"], ["job-sort", "sort"]]) {
    const value = $(`#${id}`).value.trim();
    if (value) params[key] = value;
  }
  params.limit = "50";
  return params;
}

function setJobsStatus(text, options = {}) {
  setStatus($("#jobs-status"), text, options);
}

function jobRow(job) {
  const run = job.latest_run;
  const open = el("button", { type: "button", onclick: () => openJob(job.id) }, visibleName(job.name));
  const name = el("td", { class: "name" }, open, foldedFacts([
    ["Type", textOrMissing(jobType(job), "no type sent"), "narrow"],
    ["Started", timeText(run?.started_at), "wide"],
    ["Last seen", timeText(job.last_seen), "wide"],
  ]));
  return el("tr", { "data-id": job.id, "data-name": job.name },
    name,
    el("td", { class: "ns" }, visibleName(job.namespace)),
    el("td", { class: "fold-narrow" }, textOrMissing(jobType(job), "no type sent")),
    el("td", {}, stateBadge(run?.state)),
    timeCell(run?.started_at, "fold-wide"),
    el("td", { class: "num" }, formatDuration(run?.duration_s)),
    el("td", { class: "user" }, nameOrMissing(run?.trino_user, "no user")),
    timeCell(job.last_seen, "fold-wide"));
}

function showJobs(page) {
  const body = $("#jobs tbody");
  if (page.jobs.length === 0) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: "8", class: "empty" },
      jobsState.page === 0 ? "No jobs match these filters." : "No more jobs.")));
    setJobsStatus(jobsState.page === 0 ? "No jobs match." : "");
  } else {
    body.replaceChildren(...page.jobs.map(jobRow));
    setJobsStatus(`Showing ${plural(page.jobs.length, "job")}${page.next_cursor ? "" : " (last page)"}.`);
  }
}

const jobsList = keysetList(jobsState, {
  path: "jobs", params: jobFilters, table: "#jobs", pager: "jobs-", status: setJobsStatus, loading: "Loading jobs…",
  show: showJobs,
});

function openJob(id) {
  jobsState.lastFocus = document.activeElement;
  window.location.hash = `#/jobs/${id}`;
}

// SQL as text, with a button that copies it: the clipboard API where the page may use it, else
// the selection and the copy command.
export function sqlBlock(sql, label) {
  if (!sql) return el("p", { class: "muted" }, "No SQL was sent (no sql job facet).");
  const code = el("pre", { class: "sql", tabindex: "0", "aria-label": label }, el("code", {}, sql));
  const done = el("span", { class: "copy-status", role: "status", "aria-live": "polite" });
  const copy = el("button", { type: "button", class: "copy", "aria-label": `Copy ${label}`, onclick: async () => {
    let ok = false;
    try {
      await navigator.clipboard.writeText(sql);
      ok = true;
    } catch {
      const range = document.createRange();
      range.selectNodeContents(code);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      ok = document.execCommand("copy");
    }
    done.textContent = ok ? "Copied." : "Select the text and copy it (the browser refused).";
  } }, "Copy SQL");
  return el("div", { class: "sql-block" }, el("div", { class: "sql-actions" }, copy, done), code);
}

const RUN_COLUMNS = [["Run", "col-lead"], ["State", "col-state"], ["Started", "col-time fold-wide"],
  ["Ended", "col-time fold-wide"], ["Duration", "col-duration num"], ["User", "col-user"],
  ["Source", "col-source fold-narrow"], ["Error", "col-error"]];

function runsTable(runs) {
  if (runs.length === 0) return el("p", { class: "muted" }, "No runs.");
  return el("div", { class: "table-wrap" }, el("table", { id: "runs", class: "list" },
    el("thead", {}, el("tr", {}, ...RUN_COLUMNS.map(([title, cls]) => el("th", { scope: "col", class: cls }, title)))),
    el("tbody", {}, ...runs.map((run) => el("tr", { "data-run": run.run_id },
      el("td", { class: "ns lead" }, visibleName(run.run_id), foldedFacts([
        ["Started", timeText(run.started_at), "wide"],
        ["Ended", timeText(run.ended_at), "wide"],
        ["Source", nameOrMissing(run.trino_source, "no source"), "narrow"],
      ])),
      el("td", {}, stateBadge(run.state)),
      timeCell(run.started_at, "fold-wide"),
      timeCell(run.ended_at, "fold-wide"),
      el("td", { class: "num" }, formatDuration(run.duration_s)),
      el("td", { class: "user" }, nameOrMissing(run.trino_user, "no user")),
      el("td", { class: "fold-narrow" }, nameOrMissing(run.trino_source, "no source")),
      el("td", { class: "error-text" }, run.error_message || missing("no error")))))));
}

// Symlinks both ways: the same data under other names.
function symlinkNote(dataset) {
  const names = [...dataset.symlinks, ...dataset.symlink_of];
  if (names.length === 0) return null;
  return el("div", { class: "also-named" }, "also named ", ...names.flatMap((other, i) => [
    ...(i ? [", "] : []),
    el("a", { href: `#/datasets/${other.id}` }, visibleName(other.namespace), " · ", visibleName(other.name)),
    ...(other.type ? [" ", el("span", { class: "badge" }, visibleName(other.type))] : []),
  ]));
}

function datasetsSection(id, title, datasets, emptyText) {
  const section = card(id, title, title);
  if (datasets.length === 0) {
    section.append(el("p", { class: "muted" }, emptyText));
    return section;
  }
  section.append(el("ul", { class: "relations datasets" }, ...datasets.map((dataset) => el("li", {
    "data-id": dataset.id, "data-name": dataset.name,
  }, datasetLink(dataset), dataset.kind === "symlink" ? el("span", { class: "badge symlink" }, "symlink") : null,
  symlinkNote(dataset)))));
  return section;
}

async function showJob(id) {
  const view = $("#job-view");
  const detail = $("#job-detail");
  detail.replaceChildren(el("p", { role: "status" }, "Loading job…"));
  let job;
  try {
    job = await getJSON(api(`jobs/${encodeURIComponent(id)}`));
  } catch (error) {
    detail.replaceChildren(el("p", { class: "status error", role: "alert" }, error.message));
    view.focus();
    return;
  }
  if (window.location.hash !== `#/jobs/${id}`) return; // another page was opened meanwhile
  setTitle(visibleText(job.name), "Jobs");
  detail.replaceChildren(
    el("div", { class: "detail-card" },
      el("h2", { id: "job-heading", tabindex: "-1" }, visibleName(job.name)),
      el("dl", { class: "props" },
        el("dt", {}, "Namespace"), el("dd", {}, visibleName(job.namespace)),
        el("dt", {}, "Type"), el("dd", { id: "job-type" }, textOrMissing(jobType(job), "no type sent")),
        el("dt", {}, "First seen"), el("dd", {}, job.first_seen ? formatTime(job.first_seen) : missing()),
        el("dt", {}, "Last seen"), el("dd", {}, job.last_seen ? formatTime(job.last_seen) : missing()))),
    datasetsSection("job-inputs", "Reads: the datasets its runs read", job.inputs, "Its runs read no dataset."),
    datasetsSection("job-outputs", "Writes: the datasets its runs wrote", job.outputs, "Its runs wrote no dataset."),
    ...(job.datasets_truncated ? [el("p", { class: "muted", id: "job-datasets-truncated" },
      "It read or wrote more than 100 datasets: the first 100 of each are listed.")] : []),
    card("job-sql", "Latest SQL", job.sql_dialect ? `Latest SQL (${job.sql_dialect})` : "Latest SQL",
      sqlBlock(job.latest_sql, "SQL of the job")),
    card(null, "Runs", "Runs, newest first", runsTable(job.runs)));
  $("#job-heading").focus();
}

// The queries that read and wrote a dataset, for its page (datasets.js).
export async function datasetRunsSection(datasetId) {
  const section = card("dataset-runs", "Queries", "Queries that wrote and read it");
  let answer;
  try {
    answer = await getJSON(api(`datasets/${encodeURIComponent(datasetId)}/runs?limit=10`));
  } catch (error) {
    section.append(el("p", { class: "status error" }, error.message));
    return section;
  }
  if (answer.runs.length === 0) section.append(el("p", { class: "muted" }, "No run read or wrote it."));
  else {
    section.append(el("p", {}, el("a", { href: `#/queries/dataset/${datasetId}`, id: "dataset-all-queries" },
      "All the queries that read or wrote it, newest first →")));
  }
  for (const run of answer.runs) {
    const how = [run.wrote ? "wrote" : null, run.read ? "read" : null].filter(Boolean).join(" and ");
    section.append(el("div", { class: "query" },
      el("p", {},
        el("a", { href: `#/jobs/${run.job.id}` }, visibleName(run.job.name)), ` ${how} it · `,
        stateBadge(run.state), ` ${formatTime(run.ended_at || run.started_at)}`,
        run.trino_user ? ` · ${visibleText(run.trino_user)}` : ""),
      sqlBlock(run.sql, `SQL of ${visibleText(run.job.name)}`)));
  }
  return section;
}

function wire() {
  if (jobsState.wired) return;
  jobsState.wired = true;
  jobsList.wire({
    form: "#jobs-filters", typed: ["#job-q", "#job-user"], chosen: ["#job-namespace", "#job-state", "#job-sort"],
  });
  fillNamespaces($("#job-namespace"), "jobs");
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("#job-view").hidden) window.location.hash = "#/jobs";
  });
  jobsList.restart();
}

const HEADING = "Jobs";
const SUBTITLE = "The jobs and queries that OpenLineage events name, with their runs.";

export const jobPages = [
  {
    pattern: /^#\/jobs$/, sections: ["#jobs-view"], nav: "jobs", heading: HEADING, home: "#/jobs",
    subtitle: SUBTITLE, title: "Jobs",
    open() {
      wire();
      if (jobsState.lastFocus && document.body.contains(jobsState.lastFocus)) jobsState.lastFocus.focus();
    },
  },
  {
    pattern: /^#\/jobs\/(\d+)$/, sections: ["#job-view"], nav: "jobs", heading: HEADING, home: "#/jobs",
    subtitle: SUBTITLE, title: "Jobs",
    open(match) {
      wire(); // the list behind it, for the way back
      showJob(match[1]);
    },
  },
];
