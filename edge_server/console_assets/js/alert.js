// The stop team's phone page (/console/alert): every new enforceable violation as it is stored, at
// the top, with the vehicle's picture, class and colour, speed and tolerance, zone, direction of
// travel, and the next checkpoint with its ETA (counting down); a sound when one arrives. It reads
// the live events WebSocket; a dismissed violation is struck through.
import { auth, objectUrl } from "./api.js";
import { h, num } from "./dom.js";
import { EventStream } from "./events.js";
import { credentials, signIn, signOut } from "./signin.js";

const $ = (id) => document.getElementById(id);
const KEEP = 20; // cards kept on the page
const COMPASS = ["north", "north-east", "east", "south-east", "south", "south-west", "west", "north-west"];
let events = null;
let audio = null; // an AudioContext once the officer turned the sound on (browsers need a tap)
const timers = new Set();
window.__alerts = { beeps: 0, shown: {} }; // what the tests and the benchmark read

function showLogin(message) {
  if (events) events.stop();
  events = null;
  for (const id of ["board", "logout", "sound", "link-state"]) $(id).hidden = true;
  $("login").hidden = false;
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
}

async function signInAndStart(given) {
  const { error } = await signIn(given);
  if (error) showLogin(error);
  else start();
}

function start() {
  $("login").hidden = true;
  for (const id of ["board", "logout", "sound", "link-state"]) $(id).hidden = false;
  events = new EventStream(auth.token);
  events.addEventListener("link", (e) => {
    $("link-state").classList.toggle("up", e.detail.connected);
    $("link-state").textContent = e.detail.connected ? "live" : "reconnecting…";
  });
  events.addEventListener("violation", (e) => show(e.detail.violation));
  events.addEventListener("violation.updated", (e) => update(e.detail.violation));
  events.start();
}

export function direction(deg) {
  if (deg === null || deg === undefined) return null;
  return COMPASS[Math.round((((deg % 360) + 360) % 360) / 45) % 8];
}

// A colour name for the middle of the vehicle's picture (the median of its pixels): an estimate.
export function colourName(r, g, b) {
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  const sat = max === 0 ? 0 : (max - min) / max;
  if (sat < 0.25 || max - min < 30) return max > 200 ? "white" : max > 130 ? "silver" : max > 60 ? "grey" : "black";
  let hue;
  if (max === r) hue = ((g - b) / (max - min)) * 60;
  else if (max === g) hue = (2 + (b - r) / (max - min)) * 60;
  else hue = (4 + (r - g) / (max - min)) * 60;
  hue = (hue + 360) % 360;
  if (hue < 15 || hue >= 345) return max < 110 ? "dark red" : "red";
  if (hue < 40) return max < 120 ? "brown" : "orange";
  if (hue < 70) return "yellow";
  if (hue < 170) return "green";
  if (hue < 260) return "blue";
  if (hue < 300) return "purple";
  return "pink";
}

function colourOf(img) {
  const canvas = document.createElement("canvas");
  const w = (canvas.width = Math.max(1, Math.round(img.naturalWidth / 2)));
  const ht = (canvas.height = Math.max(1, Math.round(img.naturalHeight / 2)));
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.drawImage(img, img.naturalWidth / 4, img.naturalHeight / 4, w, ht, 0, 0, w, ht);
  const data = ctx.getImageData(0, 0, w, ht).data;
  const channels = [[], [], []];
  for (let i = 0; i < data.length; i += 4) for (let c = 0; c < 3; c++) channels[c].push(data[i + c]);
  const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
  return colourName(...channels.map(median));
}

function beep() {
  window.__alerts.beeps += 1;
  if (!audio) return;
  const osc = audio.createOscillator();
  const gain = audio.createGain();
  osc.frequency.value = 880;
  gain.gain.setValueAtTime(0.3, audio.currentTime);
  gain.gain.exponentialRampToValueAtTime(0.001, audio.currentTime + 0.6);
  osc.connect(gain).connect(audio.destination);
  osc.start();
  osc.stop(audio.currentTime + 0.6);
}

function checkpointPart(v) {
  const cp = v.next_checkpoint;
  if (!cp) return h("p", { class: "checkpoint none" }, v.heading_deg == null ? "No direction (no GPS or gimbal yaw)" : "No checkpoint ahead");
  const left = h("strong", { class: "eta" });
  const tick = () => {
    const s = Math.round((new Date(cp.at) - Date.now()) / 1000);
    left.textContent = s > 0 ? `in ${s} s` : "passed";
  };
  tick();
  const timer = setInterval(tick, 1000);
  timers.add(timer);
  const clock = new Date(cp.at).toLocaleTimeString();
  return h("p", { class: "checkpoint" }, `${cp.name}: `, left, ` (${clock}, ${num(cp.distance_m, 0)} m)`);
}

function show(v) {
  if (v.status !== "enforceable" || document.querySelector(`#alerts li[data-id="${v.id}"]`)) return;
  $("waiting").hidden = true;
  const picture = h("div", { class: "picture" }, "…");
  const colour = h("span", { class: "colour" });
  const heading = direction(v.heading_deg);
  const arrow = h("span", { class: "arrow", "aria-hidden": "true" }, "↑");
  if (heading) arrow.style.transform = `rotate(${v.heading_deg}deg)`;
  const card = h(
    "li",
    { class: "alert-card", dataset: { id: v.id } },
    h("div", { class: "speed" }, h("strong", {}, `${num(v.ticket_speed_kmh, 0)} km/h`), ` in a ${num(v.speed_limit_kmh, 0)} zone`),
    picture,
    h("p", { class: "vehicle" }, h("strong", {}, v.class_name), " ", colour),
    h("p", { class: "direction" }, heading ? arrow : "", heading ? ` heading ${heading}` : "direction unknown", ` · zone ${v.zone}`),
    checkpointPart(v),
    h("p", { class: "hint" }, `tolerance ${num(v.tolerance_kmh)} km/h, ± ${num(v.ticket_sigma_kmh)} · #${v.id} · ${new Date(v.occurred_at).toLocaleTimeString()}`),
  );
  $("alerts").prepend(card);
  window.__alerts.shown[v.id] = performance.timeOrigin + performance.now();
  while ($("alerts").children.length > KEEP) $("alerts").lastElementChild.remove();
  beep();
  if (v.snapshot_url) {
    objectUrl(v.snapshot_url)
      .then((url) => {
        const img = h("img", { src: url, alt: `the ${v.class_name}` });
        img.addEventListener("load", () => (colour.textContent = `${colourOf(img)} (estimate)`));
        picture.replaceChildren(img);
      })
      .catch(() => picture.replaceChildren("no picture"));
  } else picture.replaceChildren("no picture");
}

function update(v) {
  const card = document.querySelector(`#alerts li[data-id="${v.id}"]`);
  if (card) card.classList.toggle("dismissed", v.status === "dismissed");
}

window.addEventListener("airpatrol:unauthorized", () => {
  auth.clear();
  showLogin("The server refused the token: sign in again.");
});
$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const given = credentials($("login-form"));
  if (given) signInAndStart(given);
  else showLogin("Give a user name and password, or a token.");
});
$("sound").addEventListener("click", () => {
  if (audio) {
    audio.close();
    audio = null;
  } else audio = new AudioContext();
  $("sound").textContent = audio ? "Sound on" : "Sound off";
});
$("logout").addEventListener("click", async () => {
  await signOut();
  for (const timer of timers) clearInterval(timer);
  $("alerts").replaceChildren();
  showLogin();
});
$("noscript-note").remove();

if (auth.token) signInAndStart({ token: auth.token });
else showLogin();
