// The view's pages by the hash of the URL (#/, #/datasets/12, #/jobs, …): the hash never reaches a
// server or a proxy, so a page works under any path prefix and inside Cockpit's frame.
//
// A page is { pattern, sections, nav, heading, home, subtitle, title, open }: the hash it answers,
// the sections of index.html it shows (every other page's are hidden), the navigation entry it
// marks current, the h1 (a link to `home`) and the line under it, the window title, and what to
// do once shown, given the pattern's match. Adding a page is one more addPage call.

import { $, setTitle } from "./dom.js";

const pages = [];

export function addPage(page) {
  pages.push(page);
}

function show(page, match) {
  const mine = new Set(page.sections);
  for (const other of pages) {
    for (const selector of other.sections) if (!mine.has(selector)) $(selector).hidden = true;
  }
  for (const selector of page.sections) $(selector).hidden = false;
  for (const link of document.querySelectorAll(".nav a")) {
    if (link.dataset.nav === page.nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const heading = $("#page-heading a");
  heading.textContent = page.heading;
  heading.setAttribute("href", page.home);
  $("#page-subtitle").textContent = page.subtitle;
  setTitle(page.title);
  page.open(match);
}

export function route() {
  const hash = window.location.hash || "#/";
  for (const page of pages) {
    const match = hash.match(page.pattern);
    if (match) {
      show(page, match);
      return;
    }
  }
  show(pages[0], hash.match(pages[0].pattern) || ["#/"]);
}

export function startRouter() {
  window.addEventListener("hashchange", route);
  route();
}
