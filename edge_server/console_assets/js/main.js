// The console's shell: sign-in, navigation between pages (#/live, #/violations, #/sessions), the
// live events link shared by the pages.
import { ApiError, auth, get } from "./api.js";
import { EventStream } from "./events.js";
import * as live from "./live.js";
import * as sessions from "./sessions.js";
import * as violations from "./violations.js";

const PAGES = { live, violations, sessions };
const $ = (id) => document.getElementById(id);

let events = null;
let unmount = null;

function route() {
  const [name, query] = (location.hash.replace(/^#\/?/, "") || "live").split("?");
  return { name: PAGES[name] ? name : "live", params: new URLSearchParams(query || "") };
}

function showPage() {
  if (unmount) unmount();
  const { name, params } = route();
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.page === name);
  }
  const container = $("page");
  container.replaceChildren();
  container.dataset.page = name;
  unmount = PAGES[name].mount(container, { events, params });
}

function showLogin(message) {
  if (unmount) unmount();
  unmount = null;
  if (events) events.stop();
  events = null;
  for (const id of ["nav", "page", "logout", "link-state"]) $(id).hidden = true;
  $("login").hidden = false;
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
  $("token").value = "";
  $("token").focus();
}

function showApp() {
  $("login").hidden = true;
  for (const id of ["nav", "page", "logout", "link-state"]) $(id).hidden = false;
  events = new EventStream(auth.token);
  events.addEventListener("link", (e) => {
    const state = $("link-state");
    state.classList.toggle("up", e.detail.connected);
    state.textContent = e.detail.connected ? "live" : "reconnecting…";
  });
  live.follow(events);
  events.start();
  showPage();
}

async function signIn(token) {
  auth.set(token);
  try {
    await get("/api/v1/sessions", { limit: 1 });
  } catch (error) {
    auth.clear();
    const message =
      error instanceof ApiError && error.status === 401 ? "The server refused this token." : `Cannot reach the server: ${error.message}`;
    showLogin(message);
    return;
  }
  showApp();
}

window.addEventListener("airpatrol:unauthorized", () => {
  auth.clear();
  showLogin("The server refused the token (it may have changed): sign in again.");
});
window.addEventListener("hashchange", () => {
  if (auth.token) showPage();
});
$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn($("token").value.trim());
});
$("logout").addEventListener("click", () => {
  auth.clear();
  showLogin();
});
$("noscript-note").remove();

if (auth.token) signIn(auth.token);
else showLogin();
