// Live: one card per active stream with its figures as the server sends them (every stats
// interval; the scale of its latest frame among them), its latest violation with the snapshot, its
// height above the road (a measured base or the take-off height: height.js), and the feed of events.
import { endStream, get, objectUrl, stopPath } from "./api.js";
import { STATUS_LABELS, errorText, h, num, pitchCheckText, scaleCheckText, scaleText, shortId, statusBadge, ticketSpeed, when } from "./dom.js";
import { heightTool } from "./height.js";
import { Viewer } from "./webrtc.js";

const FEED_LENGTH = 50;
const feedEntries = []; // [time, text, kind], newest first: kept across page switches
let showEntry = null; // the mounted page's

function record(text, kind) {
  const item = [new Date().toLocaleTimeString(), text, kind];
  feedEntries.unshift(item);
  feedEntries.splice(FEED_LENGTH);
  if (showEntry) showEntry(item);
}

// The feed listens from sign-in on (main.js), whichever page is shown.
export function follow(events) {
  events.addEventListener("session.started", (e) => record(`Stream ${shortId(e.detail.session_id)} started (${e.detail.kind})`, "start"));
  events.addEventListener("session.ended", (e) =>
    record(`Stream ${shortId(e.detail.session_id)} ended${e.detail.reason ? `: ${e.detail.reason}` : ""}`, "end"),
  );
  events.addEventListener("violation", (e) => {
    const v = e.detail.violation;
    record(`${ticketSpeed(v)} km/h ${v.class_name} (limit ${num(v.speed_limit_kmh, 0)}, ${v.zone}, ${STATUS_LABELS[v.status] || v.status}) in ${shortId(v.session_id)}`, "violation");
  });
}

export function mount(container, { events }) {
  const health = h("p", { class: "status", id: "health" });
  const cards = h("div", { class: "cards", id: "streams" });
  const empty = h("p", { class: "hint", id: "no-streams" }, "No stream is live. Streams appear here as soon as they start.");
  const feed = h("ol", { class: "feed", id: "feed" });
  container.append(
    h("h1", {}, "Live"),
    health,
    h("div", { class: "split" }, h("div", {}, empty, cards), h("aside", { class: "detail" }, h("h2", {}, "Events"), feed)),
  );

  const streams = new Map(); // session id -> { card, figures, violation, session }
  let urls = [];

  const entry = ([time, text, kind]) => h("li", { class: kind }, h("time", {}, time), " ", text);
  showEntry = (item) => {
    feed.prepend(entry(item));
    while (feed.children.length > FEED_LENGTH) feed.lastChild.remove();
  };
  const log = record;
  feed.append(...feedEntries.map(entry));

  // what the server gives up to keep up with this stream (edge_server.adapt): the rung and why
  function effortText(e, skipped) {
    if (!e) return "fixed effort (adapting off)";
    if (!e.level) return "full effort";
    return `${e.text}; ${skipped ?? 0} frames skipped on purpose (${e.reason})`;
  }

  function figuresOf(stream) {
    const s = stream.session || {};
    const f = { ...s, ...stream.stats };
    return [
      ["fps", num(f.processed_fps)],
      ["frames", `${f.frames_received ?? "–"} in, ${f.frames_processed ?? "–"} done`],
      ["dropped", f.frames_dropped ?? "–"],
      // missing between the received frames (lost on the way, in the server's full buffers, never
      // sent), and how late a frame reaches the server after its capture (WebRTC sender reports)
      ["lost before the server", `${f.frames_lost_before_server ?? "–"}${f.receive_delay_p95_ms == null ? "" : `; arrives ${num(f.receive_delay_p95_ms, 0)} ms after capture (p95)`}`],
      ["keeping up", effortText(f.effort, f.frames_skipped)],
      ["latency p50 / p95", `${num(f.latency_p50_ms, 0)} / ${num(f.latency_p95_ms, 0)} ms`],
      ["telemetry", f.telemetry_age_s == null ? "none yet" : `${num(f.telemetry_age_s)} s ago, ${f.telemetry_rejected ?? 0} rejected`],
      ["altitude, pitch", f.altitude_m == null ? "unknown (no telemetry)" : `${num(f.altitude_m)} m, ${num(f.gimbal_pitch_deg, 0)}°`],
      ["ground size of a pixel", f.gsd_cm_per_px == null ? "unknown: no speeds" : `${num(f.gsd_cm_per_px)} cm`],
      ["height above the road", f.scale ? `${scaleText(f.scale)} (±${num((100 * f.scale.height_sigma_m) / f.scale.height_above_road_m)} %)` : "unknown: no speeds"],
      ["scale check", f.scale_check ? scaleCheckText(f.scale_check) : "off"],
      ["pitch check", f.pitch_check ? pitchCheckText(f.pitch_check) : "off"],
      ["frame clock", f.clock_problem || "ok"],
      ["violations", stream.violations],
    ];
  }

  // A card is built once (its video element must stay in place while it plays); render() fills it.
  function build(id, stream) {
    const video = h("video", { autoplay: true, muted: true, playsinline: true, hidden: true, class: "live-video" });
    const watch = h("button", { type: "button", class: "quiet watch" }, "Watch");
    const height = h("button", { type: "button", class: "quiet height-open", title: "height above the road: measure a base", dataset: { needs: "operate" } }, "Height");
    const parts = {
      title: h("header", {}),
      size: h("p", { class: "hint" }),
      figures: h("dl", { class: "figures" }),
      last: h("div", { class: "last-violation", hidden: true }),
      heightBox: h("div", { class: "height-box", hidden: true }),
      video,
      watch,
      height,
    };
    watch.addEventListener("click", () => toggleWatch(id));
    height.addEventListener("click", () => toggleHeight(id));
    stream.parts = parts;
    stream.card = h("article", { class: "card", dataset: { id } }, parts.title, parts.size, video, parts.heightBox, parts.figures, parts.last);
    cards.append(stream.card);
  }

  function render(id) {
    const stream = streams.get(id);
    if (!stream.card) build(id, stream);
    const { title, size, figures, last: lastBox, watch, height } = stream.parts;
    const s = stream.session || { id };
    const end = s.kind && stopPath(s) ? h("button", { type: "button", class: "danger", dataset: { needs: "publish" }, onclick: () => stop(s) }, "End stream") : null;
    title.replaceChildren(h("strong", { title: id }, shortId(id)), " ", h("span", { class: "badge active" }, s.kind || "stream"), h("span", { class: "spacer" }), height, watch, end || "");
    size.textContent = s.width ? `${s.width}×${s.height}${s.camera ? `, ${s.camera}` : ""} · since ${when(s.started_at)}` : "";
    figures.replaceChildren(...figuresOf(stream).flatMap(([k, v]) => [h("dt", {}, k), h("dd", { dataset: { figure: k } }, v)]));
    const last = stream.violation;
    lastBox.hidden = !last;
    if (last) {
      lastBox.replaceChildren(
        stream.snapshot ? h("img", { src: stream.snapshot, alt: `snapshot of violation ${last.id}` }) : "",
        h("p", {}, h("a", { href: `#/violations?session_id=${encodeURIComponent(id)}` }, `${ticketSpeed(last)} km/h`), ` ${last.class_name} in ${last.zone} (limit ${num(last.speed_limit_kmh, 0)}) at ${when(last.occurred_at)} `, statusBadge(last)),
        last.ticket_speed_kmh == null && last.status_reason ? h("p", { class: "hint" }, last.status_reason) : "",
        last.scale ? h("p", { class: "hint scale" }, `Scale: ${scaleText(last.scale)}`) : "",
      );
    }
    empty.hidden = streams.size > 0;
  }

  async function toggleWatch(id) {
    const stream = streams.get(id);
    const { video, watch } = stream.parts;
    if (stream.viewer) {
      stream.viewer.close();
      stream.viewer = null;
      video.hidden = true;
      watch.textContent = "Watch";
      return;
    }
    watch.disabled = true;
    stream.viewer = new Viewer(id, video, (state) => {
      if (state === "failed") log(`Video of ${shortId(id)}: connection failed`, "error");
    });
    try {
      await stream.viewer.open();
      video.hidden = false;
      watch.textContent = "Stop watching";
    } catch (error) {
      stream.viewer.close();
      stream.viewer = null;
      log(`Cannot watch ${shortId(id)}: ${errorText(error)}`, "error");
    } finally {
      watch.disabled = false;
    }
  }

  // The height tool under the card's video: opened once, then shown and hidden.
  function toggleHeight(id) {
    const stream = streams.get(id);
    const box = stream.parts.heightBox;
    if (!stream.tool) {
      stream.tool = heightTool(id);
      box.append(stream.tool.element);
    }
    box.hidden = !box.hidden;
  }

  async function add(id) {
    if (!streams.has(id)) streams.set(id, { card: null, parts: null, viewer: null, tool: null, stats: {}, violations: 0, violation: null, snapshot: null, session: null });
    render(id);
    try {
      const session = await get(`/api/v1/sessions/${encodeURIComponent(id)}`);
      const stream = streams.get(id);
      if (!stream) return;
      stream.session = session;
      stream.violations = Math.max(stream.violations, session.violations_count);
      render(id);
    } catch {
      // not stored yet: the next stats event fills the card
    }
  }

  function remove(id) {
    const stream = streams.get(id);
    if (!stream) return;
    if (stream.viewer) stream.viewer.close();
    stream.card.remove();
    streams.delete(id);
    empty.hidden = streams.size > 0;
  }

  async function stop(s) {
    try {
      await endStream(s);
    } catch (error) {
      log(`Cannot end ${shortId(s.id)}: ${errorText(error)}`, "error");
    }
  }

  async function showHealth() {
    try {
      const r = await fetch("/healthz", { cache: "no-store" });
      const hz = await r.json();
      health.textContent = `Server ${hz.version}: ${hz.status}, database ${hz.database ? "ok" : "unreachable"}, RTMP ${hz.rtmp}, MQTT ${hz.mqtt}`;
      health.classList.toggle("error", hz.status !== "ok");
    } catch (error) {
      health.textContent = `Server unreachable: ${errorText(error)}`;
      health.classList.add("error");
    }
  }

  const handlers = {
    hello: (e) => {
      for (const id of [...streams.keys()]) if (!e.detail.active_sessions.includes(id)) remove(id);
      for (const id of e.detail.active_sessions) add(id);
    },
    "session.started": (e) => add(e.detail.session_id),
    "session.ended": (e) => remove(e.detail.session_id),
    stats: (e) => {
      const stream = streams.get(e.detail.session_id);
      if (!stream) return add(e.detail.session_id);
      stream.stats = e.detail;
      if (stream.tool) stream.tool.showScale(e.detail.scale);
      render(e.detail.session_id);
    },
    "session.height_reference": (e) => {
      const stream = streams.get(e.detail.session_id);
      if (stream && stream.tool) stream.tool.show(e.detail);
    },
    violation: (e) => {
      const v = e.detail.violation;
      const stream = streams.get(v.session_id);
      if (!stream) return;
      stream.violations += 1;
      stream.violation = v;
      render(v.session_id);
      if (v.snapshot_url) {
        objectUrl(v.snapshot_url)
          .then((url) => {
            urls.push(url);
            if (stream.violation !== v) return;
            stream.snapshot = url;
            render(v.session_id);
          })
          .catch(() => {});
      }
    },
  };
  for (const [type, handler] of Object.entries(handlers)) events.addEventListener(type, handler);
  // the hello of a link opened before this page was shown: ask for the live streams ourselves
  get("/api/v1/sessions", { status: "active", limit: 100 })
    .then((page) => page.items.forEach((s) => add(s.id)))
    .catch((error) => log(`Cannot list live streams: ${errorText(error)}`, "error"));
  showHealth();
  const timer = setInterval(showHealth, 10000);
  empty.hidden = false;

  return () => {
    showEntry = null;
    for (const stream of streams.values()) if (stream.viewer) stream.viewer.close();
    clearInterval(timer);
    for (const [type, handler] of Object.entries(handlers)) events.removeEventListener(type, handler);
    for (const url of urls) URL.revokeObjectURL(url);
    urls = [];
  };
}
