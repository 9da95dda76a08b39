// The phone-browser publisher (/console/publish): the device's camera over WebRTC to the edge server
// by WHIP (POST /whip), with the flight values the operator enters (and the device's location when
// the browser allows it) as telemetry on the "telemetry" data channel twice a second
// (docs/telemetry-datachannel.md). The server's events for this stream come back on "events".
import { auth } from "./api.js";
import { STATUS_LABELS, errorText, h, num, ticketSpeed } from "./dom.js";
import { iceGathered } from "./webrtc.js";

const TELEMETRY_MS = 500;
const $ = (id) => document.getElementById(id);
const form = $("publish-form");

let pc = null;
let stream = null;
let location_ = null; // the WHIP resource
let timers = [];
let watch = null;
let position = null;
let violations = 0;

function say(text, bad = false) {
  $("state").textContent = text;
  $("state").classList.toggle("error", bad);
}

function feed(text, kind) {
  $("feed").prepend(h("li", { class: kind }, h("time", {}, new Date().toLocaleTimeString()), " ", text));
  while ($("feed").children.length > 30) $("feed").lastChild.remove();
}

// The form's flight values, read at every message: an edit applies to the next one.
function telemetry() {
  const data = new FormData(form);
  const message = { type: "telemetry", timestamp: Date.now() / 1000 };
  for (const key of ["altitude_m", "gimbal_pitch_deg", "focal_length_35mm"]) {
    const value = data.get(key);
    if (value !== "" && value !== null && Number.isFinite(Number(value))) message[key] = Number(value);
  }
  const camera = (data.get("camera") || "").trim();
  if (camera) message.camera = camera;
  if (position) {
    message.latitude = position.coords.latitude;
    message.longitude = position.coords.longitude;
  }
  return message;
}

async function showFigures() {
  if (!pc) return;
  const stats = await pc.getStats();
  let out = null;
  stats.forEach((report) => {
    if (report.type === "outbound-rtp" && report.kind === "video") out = report;
  });
  const rows = [
    ["connection", pc.connectionState],
    ["frames sent", out ? out.framesSent : "–"],
    ["sending", out && out.frameWidth ? `${out.frameWidth}×${out.frameHeight} at ${num(out.framesPerSecond, 0)} fps` : "–"],
    ["location", position ? `${num(position.coords.latitude, 5)}, ${num(position.coords.longitude, 5)}` : "not sent"],
    ["violations", violations],
  ];
  $("figures").replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { dataset: { figure: k } }, String(v))]));
}

function onEvent(message) {
  let event;
  try {
    event = JSON.parse(message.data);
  } catch {
    return;
  }
  if (event.type === "violation") {
    violations += 1;
    const v = event.violation;
    feed(`${ticketSpeed(v)} km/h ${v.class_name} (limit ${num(v.speed_limit_kmh, 0)}, ${STATUS_LABELS[v.status] || v.status})`, "violation");
  } else if (event.type === "telemetry.rejected") {
    feed(`telemetry refused: ${event.reason}`, "error");
  } else if (event.type === "session.ended") {
    feed(`the server ended the stream: ${event.reason || event.status}`, "end");
  }
}

async function start() {
  auth.set($("token").value.trim());
  const [width, height] = new FormData(form).get("size").split("x").map(Number);
  say("Asking for the camera…");
  try {
    stream = await navigator.mediaDevices.getUserMedia({
      video: { facingMode: { ideal: "environment" }, width: { ideal: width }, height: { ideal: height }, frameRate: { ideal: 30 } },
      audio: false,
    });
  } catch (error) {
    say(`No camera: ${errorText(error)}`, true);
    return;
  }
  $("preview").srcObject = stream;
  if (new FormData(form).get("location") && navigator.geolocation) {
    watch = navigator.geolocation.watchPosition(
      (p) => (position = p),
      (error) => feed(`location not available: ${error.message}`, "error"),
      { enableHighAccuracy: true },
    );
  }
  pc = new RTCPeerConnection();
  for (const track of stream.getVideoTracks()) pc.addTransceiver(track, { direction: "sendonly", streams: [stream] });
  const channel = pc.createDataChannel("telemetry");
  const events = pc.createDataChannel("events");
  channel.addEventListener("open", () => {
    const send = () => channel.readyState === "open" && channel.send(JSON.stringify(telemetry()));
    send();
    timers.push(setInterval(send, TELEMETRY_MS));
  });
  events.addEventListener("message", onEvent);
  pc.addEventListener("connectionstatechange", () => {
    if (pc && ["failed", "closed"].includes(pc.connectionState)) stop(`Connection ${pc.connectionState}.`);
    else if (pc && pc.connectionState === "connected") say("Streaming.");
  });
  await pc.setLocalDescription(await pc.createOffer());
  await iceGathered(pc);
  say("Connecting to the server…");
  let response;
  try {
    response = await fetch("/whip", {
      method: "POST",
      headers: { "Content-Type": "application/sdp", Authorization: `Bearer ${auth.token}` },
      body: pc.localDescription.sdp,
    });
  } catch (error) {
    return stop(`Cannot reach the server: ${errorText(error)}`, true);
  }
  if (response.status !== 201) {
    let detail = response.statusText;
    try {
      detail = (await response.json()).detail || detail;
    } catch {
      // not JSON
    }
    if (response.status === 401) auth.clear();
    return stop(`The server refused the stream (${response.status}): ${detail}`, true);
  }
  location_ = response.headers.get("Location");
  await pc.setRemoteDescription({ type: "answer", sdp: await response.text() });
  $("start").disabled = true;
  $("stop").disabled = false;
  timers.push(setInterval(showFigures, 1000));
  say(`Connected: session ${location_.split("/").pop().slice(0, 8)}.`);
}

async function stop(message = "Stopped.", bad = false) {
  for (const timer of timers) clearInterval(timer);
  timers = [];
  if (watch !== null) navigator.geolocation.clearWatch(watch);
  watch = null;
  const resource = location_;
  location_ = null;
  if (resource) {
    try {
      await fetch(resource, { method: "DELETE", headers: { Authorization: `Bearer ${auth.token}` } });
    } catch {
      // the server ends it anyway when the media stops
    }
  }
  if (pc) pc.close();
  pc = null;
  if (stream) for (const track of stream.getTracks()) track.stop();
  stream = null;
  $("start").disabled = false;
  $("stop").disabled = true;
  say(message, bad);
}

$("insecure").hidden = window.isSecureContext;
$("token").value = auth.token || "";
form.addEventListener("submit", (e) => {
  e.preventDefault();
  start().catch((error) => stop(`Failed: ${errorText(error)}`, true));
});
$("stop").addEventListener("click", () => stop());
window.addEventListener("pagehide", () => location_ && stop());
