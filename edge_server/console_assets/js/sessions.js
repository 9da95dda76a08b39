// Sessions: live and past streams (paged), one's summary and tracked vehicles, ending a live
// stream, and the operator's altitude / pitch / camera for a stream that carries no telemetry.
import { endStream, get, put, stopPath } from "./api.js";
import { errorText, h, num, pitchCheckText, scaleCheckText, shortId, when } from "./dom.js";
import { PagedTable } from "./paged.js";

function operatorForm(session, say) {
  const field = (label, name, attrs) => h("label", {}, label, h("input", { name, ...attrs }));
  const form = h(
    "form",
    { class: "operator", id: "operator-form", dataset: { needs: "publish" } },
    h("h3", {}, "Flight values set by the operator"),
    h("p", { class: "hint" }, "For a stream whose telemetry lacks them (DJI Fly, a pulled camera): they scale its speeds."),
    field("Altitude (m)", "altitude_m", { type: "number", min: 1, max: 1000, step: "any" }),
    field("Gimbal pitch (°)", "gimbal_pitch_deg", { type: "number", min: -90, max: 0, step: "any", placeholder: "-90 = down" }),
    field("Camera", "camera", { placeholder: "e.g. DJI Mini 4 Pro", maxlength: 64 }),
    field("Focal length (35 mm eq.)", "focal_length_35mm", { type: "number", min: 1, max: 2000, step: "any" }),
    h("button", { type: "submit" }, "Apply to the stream"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {};
    for (const [key, value] of new FormData(form).entries()) {
      if (value === "") continue;
      body[key] = key === "camera" ? value : Number(value);
    }
    try {
      await put(`/api/v1/sessions/${encodeURIComponent(session.id)}/operator-telemetry`, body);
      say("Applied: the next frames use these values.");
    } catch (error) {
      say(`Not applied: ${errorText(error)}`, true);
    }
  });
  return form;
}

// A live stream's limits and ticket rule (PUT /api/v1/sessions/{id}/rules): they apply from its next frame.
const NUMBERS = ["tolerance_kmh", "tolerance_percent", "confidence", "min_duration_s"];
const CHOICES = {
  tolerance_mode: [
    ["max", "the larger (OIML R 91)"],
    ["kmh", "km/h only"],
    ["percent", "% only"],
  ],
  ticket_rule: [
    ["tolerance", "tolerance"],
    ["tolerance_and_sigma", "tolerance and k sigma"],
    ["lower_bound", "lower bound"],
  ],
};

function rulesForm(session, say) {
  const path = `/api/v1/sessions/${encodeURIComponent(session.id)}/rules`;
  const field = (label, name, attrs) => h("label", {}, label, h("input", { name, type: "number", step: "any", ...attrs }));
  const choice = (label, name, title) =>
    h("label", { title }, label, h("select", { name }, ...CHOICES[name].map(([value, text]) => h("option", { value }, text))));
  const zones = h("textarea", {
    name: "zones",
    rows: 4,
    spellcheck: "false",
    "aria-label": "zones as JSON",
    placeholder: '[{"name": "school", "polygon": [[0, 400], [1280, 400], [1280, 720], [0, 720]], "speed_limit_kmh": 30}]',
  });
  const form = h(
    "form",
    { class: "operator", id: "rules-form" },
    h("h3", {}, "Speed limits and ticket rule of this stream"),
    field("Limit (km/h)", "speed_limit_kmh", { min: 1, max: 300, placeholder: "zones only" }),
    field("Tolerance (km/h)", "tolerance_kmh", { min: 0, max: 50 }),
    field("Tolerance (%)", "tolerance_percent", { min: 0, max: 50 }),
    choice("Tolerance applied", "tolerance_mode", "km/h, % of the speed, or the larger of both"),
    choice("Ticket rule", "ticket_rule", "tolerance: k sigma within the tolerance and speed - tolerance over the limit; tolerance and k sigma: speed - tolerance - k sigma over it; lower bound: speed - k sigma over limit + tolerance"),
    field("Confidence", "confidence", { min: 0.5, max: 0.9999, title: "one-sided; 0.95: k = 1.645" }),
    field("Minimum time above (s)", "min_duration_s", { min: 0, max: 10 }),
    h(
      "label",
      { class: "wide" },
      "Zones: name, corners in the video's pixels, limit; the first that holds a vehicle wins (JSON, [] for none)",
      zones,
    ),
    h("button", { type: "submit", dataset: { needs: "operate" } }, "Apply limits"),
  );
  const show = (rules) => {
    form.elements.speed_limit_kmh.value = rules.speed_limit_kmh ?? "";
    for (const name of [...NUMBERS, ...Object.keys(CHOICES)]) form.elements[name].value = rules[name];
    zones.value = JSON.stringify(rules.zones);
  };
  get(path)
    .then(show)
    .catch((error) => say(`Cannot read the limits: ${errorText(error)}`, true));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = (name) => form.elements[name].value;
    const body = { speed_limit_kmh: value("speed_limit_kmh") === "" ? null : Number(value("speed_limit_kmh")) };
    for (const name of NUMBERS) if (value(name) !== "") body[name] = Number(value(name));
    for (const name of Object.keys(CHOICES)) body[name] = value(name);
    if (zones.value.trim()) {
      try {
        body.zones = JSON.parse(zones.value);
      } catch (error) {
        say(`Zones are not JSON: ${errorText(error)}`, true);
        return;
      }
    }
    try {
      show(await put(path, body));
      say("Limits applied from the next frame.");
    } catch (error) {
      say(`Limits not applied: ${errorText(error)}`, true);
    }
  });
  return form;
}

export function mount(container, { events }) {
  const statusFilter = h(
    "select",
    { id: "session-status", "aria-label": "status" },
    ...["", "active", "ended", "failed"].map((s) => h("option", { value: s }, s || "all")),
  );
  const body = h("tbody");
  const status = h("p", { class: "status" });
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const detail = h("aside", { class: "detail", id: "session-detail", hidden: true });
  const headings = ["Session", "Kind", "Status", "Started", "Frames in / dropped", "fps", "Violations", ""];
  container.append(
    h("h1", {}, "Sessions"),
    h("div", { class: "filters" }, h("label", {}, "Status", statusFilter)),
    h(
      "div",
      { class: "split" },
      h("div", { class: "scroll" }, h("table", { class: "list", id: "sessions" }, h("thead", {}, h("tr", {}, ...headings.map((t) => h("th", {}, t)))), body), status, more),
      detail,
    ),
  );

  let selected = null;

  function row(s) {
    const stop =
      s.status === "active" && stopPath(s)
        ? h("button", { type: "button", class: "danger stop", dataset: { needs: "publish" }, onclick: (e) => (e.stopPropagation(), end(s)) }, "End stream")
        : null;
    const tr = h(
      "tr",
      { dataset: { id: s.id }, class: `status-${s.status}`, tabindex: 0 },
      h("td", { title: s.id }, shortId(s.id)),
      h("td", {}, s.kind),
      h("td", { title: s.end_reason || "" }, h("span", { class: `badge ${s.status}` }, s.status)),
      h("td", {}, when(s.started_at)),
      h("td", {}, `${s.frames_received} / ${s.frames_dropped}`),
      h("td", {}, num(s.processed_fps)),
      h("td", {}, h("a", { href: `#/violations?session_id=${encodeURIComponent(s.id)}`, onclick: (e) => e.stopPropagation() }, s.violations_count)),
      h("td", {}, stop),
    );
    tr.addEventListener("click", () => select(s.id));
    tr.addEventListener("keydown", (e) => e.key === "Enter" && select(s.id));
    return tr;
  }

  const table = new PagedTable({ body, status, more, path: "/api/v1/sessions", query: () => ({ status: statusFilter.value }), render: row, noun: "session" });

  async function refresh(id) {
    try {
      const s = await get(`/api/v1/sessions/${encodeURIComponent(id)}`);
      if (!statusFilter.value || statusFilter.value === s.status) table.put(s, { prepend: !table.has(id) });
      else table.remove(id);
      table.showStatus();
      if (selected === id) show(s);
    } catch {
      // gone or not yet stored: the next event or load shows it
    }
  }

  async function end(s) {
    try {
      const result = await endStream(s);
      if (result === null) return; // not confirmed
      table.say(`Stream ${shortId(s.id)} ${result && result.status === "ended" ? "ended" : "is ending"}.`);
    } catch (error) {
      table.say(`Cannot end it: ${errorText(error)}`, true);
    }
  }

  function show(s) {
    const note = h("p", { class: "status", role: "status" });
    const say = (text, bad = false) => {
      note.textContent = text;
      note.classList.toggle("error", bad);
    };
    const info = s.info || {};
    const facts = [
      ["Status", `${s.status}${s.end_reason ? ` (${s.end_reason})` : ""}`],
      ["Kind", `${s.kind}${s.remote ? ` from ${s.remote}` : ""}`],
      ["Server", s.server_id || "–"],
      ["Started", when(s.started_at)],
      ["Ended", when(s.ended_at)],
      ["Video", s.width ? `${s.width}×${s.height}${s.camera ? `, ${s.camera}` : ""}` : "–"],
      ["Frames", `${s.frames_received} received, ${s.frames_processed} processed, ${s.frames_dropped} dropped`],
      ["Telemetry", `${s.telemetry_received} received, ${s.telemetry_rejected} rejected`],
      ["Speed", `${num(s.processed_fps)} fps; latency p50 ${num(s.latency_p50_ms, 0)} ms, p95 ${num(s.latency_p95_ms, 0)} ms`],
    ];
    // the stream's height above the road (issue 39): the reference in effect, and how many changes
    const height = info.height_reference;
    if (height) {
      const ref = height.reference;
      const changes = (info.height_reference_log || []).length;
      const text = ref ? `${ref.detail || `take-off ${num(ref.takeoff_above_road_m, 2)} m above the road`}${ref.set_by ? `, set by ${ref.set_by} at ${when(ref.set_at)}` : " (site configuration)"}` : "none: the drone's altitude over unknown ground";
      facts.push(["Height reference", `${text}${changes ? `; ${changes} change(s)` : ""}`]);
    }
    // the scale against the cars' sizes (issue 40): ok, suspect (the telemetry's scale is off) or why unverified
    if (info.scale_check) facts.push(["Scale check", scaleCheckText(info.scale_check)]);
    // the gimbal's pitch against the traffic's speeds (issue 39)
    if (info.pitch_check) facts.push(["Pitch check", pitchCheckText(info.pitch_check)]);
    const reasons = info.telemetry_reject_reasons || [];
    const clock = Object.entries(info.clock_problems || {});
    const tracks = (s.tracks || []).slice(0, 200);
    detail.hidden = false;
    const parts = [
      h("h2", {}, `Session ${shortId(s.id)}`),
      h("dl", {}, ...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      reasons.length ? h("p", { class: "hint" }, `Rejected telemetry: ${reasons.join("; ")}`) : null,
      clock.length
        ? h("p", { class: "error" }, `Frame timestamps: ${clock.map(([what, n]) => `${what} (${n} frames)`).join("; ")}`)
        : null,
      s.status === "active" ? rulesForm(s, say) : null,
      s.status === "active" ? operatorForm(s, say) : null,
      note,
      tracks.length
        ? h(
            "table",
            { class: "list compact" },
            h("thead", {}, h("tr", {}, ...["Track", "Class", "Seen s", "Peak km/h", "Mean km/h", "Violated"].map((t) => h("th", {}, t)))),
            h(
              "tbody",
              {},
              ...tracks.map((t) =>
                h(
                  "tr",
                  { class: t.violated ? "violated" : null },
                  h("td", {}, t.track_id),
                  h("td", {}, t.class_name),
                  h("td", {}, `${num(t.first_time_s)}–${num(t.last_time_s)}`),
                  h("td", {}, num(t.peak_speed_kmh)),
                  h("td", {}, num(t.mean_speed_kmh)),
                  h("td", {}, t.violated ? "yes" : ""),
                ),
              ),
            ),
          )
        : h("p", { class: "hint" }, "No tracked vehicle stored yet."),
    ];
    detail.replaceChildren(...parts.filter(Boolean));
  }

  async function select(id) {
    selected = id;
    table.select(id);
    try {
      show(await get(`/api/v1/sessions/${encodeURIComponent(id)}`));
    } catch (error) {
      detail.hidden = false;
      detail.replaceChildren(h("p", { class: "error" }, errorText(error)));
    }
  }

  const onChange = (e) => refresh(e.detail.session_id);
  const onStats = (e) => {
    const session = table.item(e.detail.session_id);
    if (session) table.put({ ...session, ...e.detail, type: undefined });
  };
  events.addEventListener("session.started", onChange);
  events.addEventListener("session.ended", onChange);
  events.addEventListener("stats", onStats);
  statusFilter.addEventListener("change", () => table.load(true));
  table.load(true);
  return () => {
    events.removeEventListener("session.started", onChange);
    events.removeEventListener("session.ended", onChange);
    events.removeEventListener("stats", onStats);
  };
}
