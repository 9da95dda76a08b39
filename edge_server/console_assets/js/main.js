// The console's shell: sign-in (signin.js), navigation between pages (#/live, #/violations, #/sessions,
// #/map), the live events link shared by the pages.
import { auth } from "./api.js";
import { EventStream } from "./events.js";
import * as live from "./live.js";
import * as map from "./map.js";
import * as sessions from "./sessions.js";
import { credentials, signIn, signOut } from "./signin.js";
import * as violations from "./violations.js";

const PAGES = { live, violations, sessions, map };
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
  for (const id of ["nav", "page", "logout", "link-state", "whoami"]) $(id).hidden = true;
  delete document.body.dataset.access;
  $("login").hidden = false;
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
  $("token").value = "";
  $("password").value = "";
  $("username").focus();
}

function showApp() {
  $("login").hidden = true;
  const me = auth.me;
  document.body.dataset.access = me.access.join(" ");
  $("whoami").textContent = `${me.name} · ${me.role}`;
  $("whoami").title = me.kind === "user" ? `signed in until ${new Date(me.expires_at).toLocaleString()}` : `${me.kind} token`;
  for (const id of ["nav", "page", "logout", "link-state", "whoami"]) $(id).hidden = false;
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

async function signInAndShow(given) {
  const { error } = await signIn(given);
  if (error) showLogin(error);
  else showApp();
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
  const given = credentials($("login-form"));
  if (given) signInAndShow(given);
  else showLogin("Give a user name and password, or a token.");
});
$("logout").addEventListener("click", async () => {
  await signOut();
  showLogin();
});
$("noscript-note").remove();

if (auth.token) signInAndShow({ token: auth.token });
else showLogin();
