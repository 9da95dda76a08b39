// The console's shell: sign-in, navigation between pages (#/live, #/violations, #/sessions), the
// live events link shared by the pages.
import { ApiError, auth, get, request } from "./api.js";
import { EventStream } from "./events.js";
import * as live from "./live.js";
import * as map from "./map.js";
import * as sessions from "./sessions.js";
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

// Sign in with a user name and password (a token for one shift), or with a token: either way the
// token is kept in this tab's sessionStorage with who it is (GET /api/v1/auth/me).
async function signIn({ username, password, token }) {
  try {
    if (username) {
      const signed = await request("POST", "/api/v1/auth/login", { body: { username, password }, token: null });
      token = signed.token;
    }
    auth.set(token);
    const me = await get("/api/v1/auth/me");
    if (!me.access.includes("read")) {
      await signOut();
      showLogin(`This ${me.role} token may publish streams but not use the console: use "Stream from this device".`);
      return;
    }
    auth.setMe(me);
  } catch (error) {
    auth.clear();
    const refused = {
      login_refused: "Wrong user name or password (or the account is disabled).",
      too_many_attempts: `Too many failed sign-ins: ${error.message}.`,
      unauthorized: "The server refused this token.",
    }[error instanceof ApiError ? error.code : ""];
    showLogin(refused || `Cannot reach the server: ${error.message}`);
    return;
  }
  showApp();
}

// Sign out: the server forgets a user's or machine's token (the server's own API token stays).
async function signOut() {
  if (auth.token) {
    try {
      await request("POST", "/api/v1/auth/logout");
    } catch {
      // already refused, or the server's API token (409): nothing to end on the server
    }
  }
  auth.clear();
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
  const username = $("username").value.trim();
  const token = $("token").value.trim();
  if (!username && !token) {
    showLogin("Give a user name and password, or a token.");
    return;
  }
  signIn(username ? { username, password: $("password").value } : { token });
});
$("logout").addEventListener("click", async () => {
  await signOut();
  showLogin();
});
$("noscript-note").remove();

if (auth.token) signIn({ token: auth.token });
else showLogin();
