// The view's entry point: plain ES modules, no build step, no third-party code. It registers the
// pages with the router and keeps the forwarding footer; the pages live in their own modules and
// share dom.js, and nothing imports this one.

import { datasetPages } from "./datasets.js";
import { $, api, el, getJSON, plural } from "./dom.js";
import { jobPages } from "./jobs.js";
import { queryPages } from "./queries.js";
import { addPage, startRouter } from "./router.js";
import { wireSearch } from "./search.js";

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
  for (const page of [...datasetPages, ...queryPages, ...jobPages]) addPage(page);
  wireSearch();
  startRouter();
  loadForwarding();
  setInterval(loadForwarding, 10000);
});
