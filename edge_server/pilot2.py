"""DJI Pilot 2's "Open Platform" page: what connects Pilot 2 to this server's MQTT broker.

Pilot 2 joins a third-party cloud by opening a web page the pilot types in (Cloud Services > Open
Platform); the page talks to the app through DJI's JSBridge (``window.djiBridge``): it verifies the
site's DJI Cloud API license (``platformVerifyLicense``: app id, app key and license from the site's
DJI developer account; settings ``dji_app_*``), names the platform and loads the ``thing`` module
with the broker's address and credentials, after which Pilot 2 publishes the aircraft's OSD there.
The page also makes the RTMP stream key of the aircraft in view (``platformGetAircraftSN``), so
video and telemetry meet in one session.

The page itself is public and holds no secret: the pilot types the API token once (kept in the
app's web storage), and the page reads the MQTT credentials and the license from
``GET /api/v1/dji/pilot2-config`` with it.
"""

from __future__ import annotations

PILOT2_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<meta name="referrer" content="no-referrer">
<title>AirPatrol - DJI Pilot 2</title>
<style>
body { font-family: sans-serif; margin: 1.5em; background: #111; color: #eee; }
input, button { font-size: 1.1em; padding: .4em; margin: .2em 0; }
input { width: 100%; box-sizing: border-box; }
.ok { color: #7d7; } .bad { color: #f77; } code { word-break: break-all; color: #9cf; }
</style>
</head>
<body>
<h2>AirPatrol edge server</h2>
<form id="login" hidden>
  <label>API token of this server<input id="token" type="password" autocomplete="off"></label>
  <button type="submit">Connect</button>
</form>
<p id="status">Loading...</p>
<p>Telemetry (MQTT): <span id="mqtt">not connected</span></p>
<p>Aircraft: <span id="aircraft">-</span></p>
<button id="make-key" hidden>Make the RTMP stream key of this aircraft</button>
<p id="key" hidden>Live stream URL (Pilot 2: camera view, ... > Transmission > Live Stream Platforms > RTMP):
<code id="key-url"></code></p>
<script>
(function () {
  const KEY = "airpatrol-api-token";
  const $ = (id) => document.getElementById(id);
  const say = (text, ok) => { $("status").textContent = text; $("status").className = ok ? "ok" : "bad"; };
  const bridge = window.djiBridge;
  let config = null;

  function call(name, ...args) {  // the JSBridge answers JSON text {"code": 0, "data": ...}
    const out = bridge[name](...args);
    try { return typeof out === "string" ? JSON.parse(out) : out; } catch (e) { return out; }
  }

  window.airpatrolThingConnected = function (connected) {
    const up = connected === true || connected === "true" || (connected && connected.code === 0);
    $("mqtt").textContent = up ? "connected" : "not connected";
    $("mqtt").className = up ? "ok" : "bad";
  };

  async function api(path, options) {
    const token = localStorage.getItem(KEY);
    const r = await fetch(path, { ...options, headers: { ...(options && options.headers),
      "Authorization": "Bearer " + token, "Content-Type": "application/json" } });
    if (r.status === 401) { localStorage.removeItem(KEY); $("login").hidden = false; throw new Error("wrong API token"); }
    const body = await r.json();
    if (!r.ok) { throw new Error(body.detail || r.statusText); }
    return body;
  }

  async function start() {
    if (!localStorage.getItem(KEY)) { $("login").hidden = false; say("Enter the server's API token.", false); return; }
    $("login").hidden = true;
    try { config = await api("/api/v1/dji/pilot2-config"); } catch (e) { say(String(e.message || e), false); return; }
    if (!bridge) {
      say("Open this page in DJI Pilot 2 (Cloud Services > Open Platform). MQTT: " + config.mqtt.host, false);
      return;
    }
    if (!config.license) { say(config.license_missing, false); return; }
    const license = call("platformVerifyLicense", config.license.app_id, config.license.app_key, config.license.license);
    if (!license || license.code !== 0 || license.data === false) {
      say("DJI rejected the Cloud API license: " + JSON.stringify(license), false); return;
    }
    call("platformSetInformation", "AirPatrol", config.workspace_name, "drone traffic monitoring");
    const thing = call("platformLoadComponent", "thing", JSON.stringify({
      host: config.mqtt.host, username: config.mqtt.username, password: config.mqtt.password,
      connectCallback: "airpatrolThingConnected" }));
    if (!thing || thing.code !== 0) { say("Pilot 2 did not load the telemetry module: " + JSON.stringify(thing), false); return; }
    say("Connected to the edge server.", true);
    const sn = bridge.platformGetAircraftSN ? call("platformGetAircraftSN") : null;
    const serial = sn && typeof sn === "object" ? sn.data : sn;
    $("aircraft").textContent = serial || "no aircraft connected";
    $("make-key").hidden = !serial;
    $("make-key").onclick = async function () {
      try {
        const key = await api("/api/v1/rtmp/keys", { method: "POST",
          body: JSON.stringify({ name: "Pilot 2 " + serial, device_sn: serial }) });
        $("key-url").textContent = key.url; $("key").hidden = false;
      } catch (e) { say(String(e.message || e), false); }
    };
  }

  $("login").onsubmit = function (ev) {
    ev.preventDefault();
    localStorage.setItem(KEY, $("token").value.trim());
    $("token").value = "";
    start();
  };
  start();
})();
</script>
</body>
</html>
"""

__all__ = ["PILOT2_PAGE"]
