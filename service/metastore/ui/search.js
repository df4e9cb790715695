// The search box at the top of every page: GET /search over dataset, job and field names, each
// hit typed and a link to its page (a field opens its dataset with that field traced).
// Data reaches the page through textContent only.

import { $, api, debounce, el, getJSON, plural, visibleName } from "./dom.js";

const MATCHES = { exact: "exact", prefix: "starts with it", substring: "contains it" };
let token = 0;

export function fieldHash(datasetId, field) {
  return `#/datasets/${datasetId}/fields/${encodeURIComponent(field)}`;
}

function hit(result) {
  const badge = el("span", { class: `badge hit-type hit-${result.type}` }, result.type);
  const match = el("span", { class: "muted hit-match" }, MATCHES[result.match] || result.match);
  if (result.type === "field") {
    const links = result.datasets.map((d) => el("li", {},
      el("a", { href: fieldHash(d.id, result.field), "data-id": d.id }, visibleName(d.name)),
      " ", el("span", { class: "ref-ns" }, visibleName(d.namespace))));
    return el("li", { class: "hit", "data-type": "field", "data-name": result.field },
      badge, " ", el("code", {}, visibleName(result.field)), " ", match,
      el("ul", { class: "hit-datasets" }, ...links),
      result.more_datasets ? el("p", { class: "muted" }, "More datasets have a field of this name.") : null);
  }
  const href = result.type === "job" ? `#/jobs/${result.id}` : `#/datasets/${result.id}`;
  return el("li", { class: "hit", "data-type": result.type, "data-name": result.name, "data-id": result.id },
    badge, " ", el("a", { href }, visibleName(result.name)), " ", match,
    el("div", { class: "ref-ns" }, visibleName(result.namespace)),
    result.kind === "symlink" ? el("span", { class: "badge symlink" }, "symlink") : null);
}

function close() {
  $("#search-panel").hidden = true;
}

async function run() {
  const mine = ++token;
  const input = $("#search-q");
  const q = input.value.trim();
  const panel = $("#search-panel");
  const status = $("#search-status");
  const list = $("#search-results");
  if (!q) {
    list.replaceChildren();
    close();
    return;
  }
  panel.hidden = false;
  status.classList.remove("error");
  status.textContent = "Searching…";
  let answer;
  try {
    const url = api("search");
    url.searchParams.set("q", q);
    url.searchParams.set("limit", "20");
    answer = await getJSON(url);
  } catch (error) {
    if (mine !== token) return;
    list.replaceChildren();
    status.classList.add("error");
    status.textContent = error.message;
    return;
  }
  if (mine !== token) return;
  list.replaceChildren(...answer.results.map(hit));
  status.textContent = answer.results.length === 0 ? "Nothing is named like that."
    : `${plural(answer.results.length, "result")}: exact names first, then those that start with it, then those that `
      + `contain it${answer.partial ? " (the newest names only, for some kinds)" : ""}.`;
}

export function wireSearch() {
  const form = $("#search");
  const input = $("#search-q");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  const later = debounce(run, 250);
  // Results of the text before are not shown as this one's: they go as soon as it changes.
  input.addEventListener("input", () => {
    token += 1;
    $("#search-results").replaceChildren();
    $("#search-status").classList.remove("error");
    $("#search-status").textContent = input.value.trim() ? "Searching…" : "";
    later();
  });
  input.addEventListener("focus", () => {
    if (input.value.trim()) $("#search-panel").hidden = false;
  });
  // Escape or a page opened closes the results; leaving the form by Tab or a click does too.
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("#search-panel").hidden) {
      event.stopPropagation();
      close();
      input.focus();
    }
    // Up and down move between the input and the results' links, as Tab and Shift+Tab do.
    if ((event.key === "ArrowDown" || event.key === "ArrowUp") && !$("#search-panel").hidden) {
      const stops = [input, ...document.querySelectorAll("#search-results a")];
      const at = stops.indexOf(document.activeElement);
      if (at < 0) return;
      const next = event.key === "ArrowDown" ? Math.min(at + 1, stops.length - 1) : Math.max(at - 1, 0);
      event.preventDefault();
      stops[next].focus();
    }
  });
  form.addEventListener("focusout", (event) => {
    if (!form.contains(event.relatedTarget)) close();
  });
  window.addEventListener("hashchange", close);
}
