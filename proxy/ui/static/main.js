// The router: #/ sessions, #/session/<id>[/<exchange>], #/overview.
// Each page renders into <main> and may return a function that stops it.

import { h } from "./dom.js";
import { renderSessions } from "./sessions.js";
import { renderSession } from "./session.js";
import { renderOverview } from "./overview.js";

const view = document.getElementById("view");
let stopPage = null;

function route() {
  if (stopPage) stopPage();
  stopPage = null;
  const [path, query] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  let page = "sessions";
  view.replaceChildren();
  try {
    if (parts[0] === "session" && parts[1]) {
      page = "session";
      stopPage = renderSession(view, parts[1], parts[2] || null);
    } else if (parts[0] === "overview") {
      page = "overview";
      renderOverview(view, params);
    } else {
      renderSessions(view, params);
    }
  } catch (error) {
    view.replaceChildren(h("p", { class: "error" }, String(error)));
  }
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === page || (page === "session" && link.dataset.nav === "sessions"));
  }
}

window.addEventListener("hashchange", route);
route();
