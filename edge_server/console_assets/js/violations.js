// Violations: filters, a paged table (50 at a time, "Load more" follows the server's cursor, so
// the page never asks for all of them), the detail of one (snapshot, clip, the ticket speed and its
// measuring base, figures), the false-positive toggle, CSV export of the filtered set; new ones
// arrive live. The speed shown is the ticket speed ± sigma; the per-frame peak is informative.
import { get, may, objectUrl, put, request } from "./api.js";
import { STATUS_LABELS, errorText, h, num, pitchCheckText, scaleCheckText, scaleText, shortId, statusBadge, ticketSpeed, when } from "./dom.js";
import { PagedTable } from "./paged.js";
const CLASSES = ["", "car", "van", "truck", "bus", "motorcycle", "vehicle"];
const SORTS = [
  ["-occurred_at", "newest first"],
  ["occurred_at", "oldest first"],
  ["-ticket_speed_kmh", "ticket speed, fastest first"],
  ["ticket_speed_kmh", "ticket speed, slowest first"],
];

function filterForm(params) {
  const field = (label, name, attrs = {}) =>
    h("label", {}, label, h("input", { name, value: params.get(name) || "", ...attrs }));
  return h(
    "form",
    { class: "filters", id: "violation-filters" },
    field("From", "since", { type: "datetime-local", step: 1 }),
    field("To", "until", { type: "datetime-local", step: 1 }),
    field("Session", "session_id", { placeholder: "id", size: 10 }),
    field("Zone", "zone", { placeholder: "global", size: 8 }),
    field("Server", "server_id", { placeholder: "any", size: 8 }),
    h(
      "label",
      {},
      "Class",
      h("select", { name: "class_name" }, ...CLASSES.map((c) => h("option", { value: c, selected: params.get("class_name") === c }, c || "any"))),
    ),
    field("Min ticket km/h", "min_speed_kmh", { type: "number", min: 0, max: 1000, step: "any", size: 5, title: "violations without a ticket speed are left out" }),
    field("Max ticket km/h", "max_speed_kmh", { type: "number", min: 0, max: 1000, step: "any", size: 5, title: "violations without a ticket speed are left out" }),
    h(
      "label",
      {},
      "Status",
      h(
        "select",
        { name: "status" },
        h("option", { value: "" }, "any"),
        ...Object.entries(STATUS_LABELS).map(([value, label]) => h("option", { value, selected: params.get("status") === value }, label)),
      ),
    ),
    h(
      "label",
      {},
      "False positives",
      h(
        "select",
        { name: "false_positive" },
        h("option", { value: "" }, "shown"),
        h("option", { value: "false", selected: params.get("false_positive") === "false" }, "hidden"),
        h("option", { value: "true", selected: params.get("false_positive") === "true" }, "only"),
      ),
    ),
    h(
      "label",
      {},
      "Sort",
      h("select", { name: "sort" }, ...SORTS.map(([value, label]) => h("option", { value, selected: params.get("sort") === value }, label))),
    ),
    h("button", { type: "submit" }, "Apply"),
    h("button", { type: "button", class: "quiet", id: "export-csv", dataset: { needs: "operate" } }, "Export CSV"),
  );
}

// datetime-local is the browser's local time: the API wants ISO 8601 with its offset.
function filtersOf(form) {
  const data = Object.fromEntries(new FormData(form).entries());
  for (const key of ["since", "until"]) {
    if (data[key]) data[key] = new Date(data[key]).toISOString();
  }
  for (const key of Object.keys(data)) if (data[key] === "") delete data[key];
  return data;
}

// Whether a violation pushed live belongs in the table as filtered.
function matches(v, f) {
  if (f.session_id && v.session_id !== f.session_id) return false;
  if (f.zone && v.zone !== f.zone) return false;
  if (f.class_name && v.class_name !== f.class_name) return false;
  if (f.server_id && v.server_id !== f.server_id) return false;
  const speed = v.ticket_speed_kmh; // a speed filter leaves out violations without one, as the server does
  if (f.min_speed_kmh && (speed == null || speed < Number(f.min_speed_kmh))) return false;
  if (f.max_speed_kmh && (speed == null || speed > Number(f.max_speed_kmh))) return false;
  if (f.status && !f.status.split(",").includes(v.status)) return false;
  if (f.false_positive && String(v.false_positive) !== f.false_positive) return false;
  if (f.since && new Date(v.occurred_at) < new Date(f.since)) return false;
  if (f.until && new Date(v.occurred_at) >= new Date(f.until)) return false;
  return true;
}

export function mount(container, { events, params }) {
  const form = filterForm(params);
  const body = h("tbody");
  const status = h("p", { class: "status", id: "violation-status" });
  const more = h("button", { type: "button", id: "load-more", hidden: true }, "Load more");
  const detail = h("aside", { class: "detail", id: "violation-detail", hidden: true });
  const grid = h(
    "table",
    { class: "list", id: "violations" },
    h(
      "thead",
      {},
      h("tr", {}, ...["#", "Time", "Class", "Zone", "Ticket km/h", "Limit", "Status", "Session", "False positive"].map((t) => h("th", {}, t))),
    ),
    body,
  );
  container.append(
    h("h1", {}, "Violations"),
    form,
    h("div", { class: "split" }, h("div", { class: "scroll" }, grid, status, more), detail),
  );

  let filters = filtersOf(form);
  let selected = null;
  let urls = [];
  function row(v) {
    const toggle = h("input", { type: "checkbox", class: "fp", "aria-label": `violation ${v.id} is a false positive`, disabled: !may("operate") });
    toggle.checked = v.false_positive;
    toggle.addEventListener("click", (e) => e.stopPropagation());
    toggle.addEventListener("change", () => setFalsePositive(v.id, toggle.checked, toggle));
    const tr = h(
      "tr",
      { dataset: { id: v.id }, class: v.false_positive ? "dismissed" : null, tabindex: 0 },
      h("td", {}, v.id),
      h("td", {}, when(v.occurred_at)),
      h("td", {}, v.class_name),
      h("td", {}, v.zone),
      h("td", { class: "speed", title: v.ticket_speed_kmh == null ? v.status_reason : null }, ticketSpeed(v)),
      h("td", {}, num(v.speed_limit_kmh, 0)),
      h("td", { class: "status" }, statusBadge(v), v.status_reason ? h("span", { class: "reason", title: v.status_reason }, v.status_reason) : null),
      h("td", { title: v.session_id }, shortId(v.session_id)),
      h("td", {}, toggle),
    );
    tr.addEventListener("click", () => select(v.id));
    tr.addEventListener("keydown", (e) => e.key === "Enter" && select(v.id));
    return tr;
  }

  const table = new PagedTable({ body, status, more, path: "/api/v1/violations", query: () => filters, render: row, noun: "violation matches" });

  async function setFalsePositive(id, value, toggle) {
    try {
      table.put(await put(`/api/v1/violations/${id}/false_positive`, { false_positive: value }));
      if (selected === id) select(id);
    } catch (error) {
      toggle.checked = !value;
      table.say(`Not saved: ${errorText(error)}`, true);
    }
  }

  function release() {
    for (const url of urls) URL.revokeObjectURL(url);
    urls = [];
  }

  async function select(id) {
    selected = id;
    table.select(id);
    release();
    let v;
    try {
      v = await get(`/api/v1/violations/${id}`);
    } catch (error) {
      detail.hidden = false;
      detail.replaceChildren(h("p", { class: "error" }, errorText(error)));
      return;
    }
    const snapshot = h("div", { class: "snapshot" }, v.snapshot_url ? "Loading snapshot…" : "No snapshot.");
    const clip = h("div", { class: "clip" });
    const base = v.base;
    const facts = [
      ["Ticket speed", v.ticket_speed_kmh == null ? `— (${v.status_reason || "no measuring base"})` : `${ticketSpeed(v, " km/h")} km/h`],
      ["Status", h("span", {}, statusBadge(v), v.status_reason ? ` ${v.status_reason}` : "")],
      ["Limit", `${num(v.speed_limit_kmh, 0)} km/h in ${v.zone}`],
      ["Tolerance", v.tolerance_kmh == null ? "–" : `${num(v.tolerance_kmh)} km/h at this speed`],
      ["Confidence factor k", num(v.confidence_k, 3)],
      [
        "Measuring base",
        base
          ? `${num(base.start_time_s, 2)}–${num(base.end_time_s, 2)} s (${num(base.duration_s, 2)} s), frames ${base.start_frame}–${base.end_frame}, ${num(base.distance_m)} m, ${base.n_samples} positions${base.of > 1 ? `; base ${base.index} of ${base.of}` : ""}${base.track_id != null ? `; measured on track ${base.track_id}, the same vehicle's longer run` : ""}`
          : "none",
      ],
      ["Peak per frame", `${num(v.peak_speed_kmh)} km/h ± ${num(v.sigma_kmh)} (mean ${num(v.mean_speed_kmh)}; informative, not the ticket speed)`],
      ["When", `${when(v.occurred_at)} (stream ${num(v.start_time_s, 2)}–${num(v.end_time_s, 2)} s, frames ${v.start_frame}–${v.end_frame})`],
      ["Vehicle", `${v.class_name}, track ${v.track_id}`],
      ["Position", v.latitude !== null ? `${num(v.latitude, 6)}, ${num(v.longitude, 6)}` : "–"],
      ["Drone", v.drone_latitude !== null ? `${num(v.drone_latitude, 6)}, ${num(v.drone_longitude, 6)}` : "–"],
      ["Altitude", v.altitude_m !== null ? `${num(v.altitude_m)} m above take-off (${v.scale_source || "?"})` : "–"],
      ["Scale", v.scale ? scaleText(v.scale) : "not recorded"],
      ["Scale check", scaleCheckText(v.scale_check)],
      ["Pitch check", pitchCheckText(v.pitch_check)],
      ["Session", v.session_id],
      ["Recorded by", v.server_id || "–"],
      ["Evidence pack", evidencePart(v)],
      ["Retention", retentionPart(v)],
    ];
    const history = h("ol", { id: "history", class: "history" }, h("li", {}, "Loading history…"));
    detail.hidden = false;
    detail.replaceChildren(
      h("h2", {}, `Violation ${v.id} `, statusBadge(v), v.false_positive ? h("span", { class: "tag" }, "false positive") : null),
      snapshot,
      clip,
      h("dl", {}, ...facts.flatMap(([k, val]) => [h("dt", {}, k), h("dd", {}, val)])),
      h("h3", {}, "History (audit trail)"),
      history,
    );
    loadHistory(id);
    if (v.snapshot_url) {
      objectUrl(v.snapshot_url)
        .then((url) => {
          if (selected !== id) return URL.revokeObjectURL(url);
          urls.push(url);
          snapshot.replaceChildren(h("img", { src: url, alt: `snapshot of violation ${id}` }));
        })
        .catch((error) => snapshot.replaceChildren(`No snapshot: ${errorText(error)}`));
    }
    if (v.clip_url) {
      const play = h("button", { type: "button", id: "play-clip" }, "Play clip");
      play.addEventListener("click", async () => {
        play.disabled = true;
        try {
          const url = await objectUrl(v.clip_url);
          if (selected !== id) return URL.revokeObjectURL(url);
          urls.push(url);
          clip.replaceChildren(h("video", { src: url, controls: true, autoplay: true, muted: true, playsinline: true }));
        } catch (error) {
          clip.replaceChildren(`No clip: ${errorText(error)}`);
        }
      });
      clip.replaceChildren(play);
    } else {
      clip.replaceChildren("Clip not written yet.");
    }
  }

  // The selected violation's entries in the audit trail (again when it changes).
  function loadHistory(id) {
    get(`/api/v1/violations/${id}/history`)
      .then(({ entries }) => {
        const history = detail.querySelector("#history");
        if (selected !== id || !history) return;
        history.replaceChildren(
          ...(entries.length ? entries.map(historyItem) : [h("li", {}, "No entries (stored before the audit trail, untouched since).")]),
        );
      })
      .catch((error) => detail.querySelector("#history")?.replaceChildren(h("li", {}, `No history: ${errorText(error)}`)));
  }

  // One audit-trail entry: when, who, what, and what changed.
  function historyItem(e) {
    const change = (e.before || e.after)
      ? ` ${e.before ? JSON.stringify(e.before) : "–"} → ${e.after ? JSON.stringify(e.after) : "–"}`
      : "";
    return h("li", {}, h("code", {}, `#${e.seq}`), ` ${when(e.at)} `, h("b", {}, e.actor), ` ${e.action}${change}`, e.detail ? ` (${e.detail})` : "");
  }

  function saveBlob(blob, name) {
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: name });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // Retention (docs/evidence.md): a legal hold keeps the violation and its media; an admin places or
  // releases it (with a reason); media that retention removed say when.
  function retentionPart(v) {
    const out = h("span", { id: "retention" });
    const hold = v.legal_hold;
    out.append(
      hold ? `legal hold: ${hold.reason || ""} (${hold.by || "?"}, ${when(hold.at)})` : "no legal hold",
      v.media_purged_at ? `; media removed by retention ${when(v.media_purged_at)}` : "",
    );
    if (may("admin")) {
      const button = h("button", { type: "button", class: "quiet", id: "legal-hold" }, hold ? "Release hold" : "Place legal hold");
      button.addEventListener("click", async () => {
        const reason = hold ? null : prompt("Reason for the legal hold (e.g. the case number):");
        if (!hold && !reason) return;
        button.disabled = true;
        try {
          table.put(await put(`/api/v1/violations/${v.id}/legal-hold`, hold ? { hold: false } : { hold: true, reason }));
          if (selected === v.id) select(v.id);
        } catch (error) {
          button.after(` ${errorText(error)}`);
          button.disabled = false;
        }
      });
      out.append(" ", button);
    }
    return out;
  }

  // The signed evidence pack (docs/evidence.md): download it, or have it made for an older violation.
  function evidencePart(v) {
    const out = h("span", { id: "evidence", dataset: { needs: "operate" } });
    if (v.evidence) {
      const save = h("button", { type: "button", id: "download-evidence" }, "Download");
      save.addEventListener("click", () => download(v.evidence.url, `violation-${v.id}-evidence.zip`, save));
      out.append(
        save,
        ` signed, SHA-256 ${v.evidence.sha256.slice(0, 16)}…, made ${when(v.evidence.made_at)}`,
        v.evidence.made_later ? " (later, on request)" : "",
      );
    } else {
      const make = h("button", { type: "button", id: "make-evidence" }, "Make evidence pack");
      make.addEventListener("click", async () => {
        make.disabled = true;
        try {
          await request("POST", `/api/v1/violations/${v.id}/evidence`);
          if (selected === v.id) select(v.id);
        } catch (error) {
          out.replaceChildren(`Not made: ${errorText(error)}`);
        }
      });
      out.append(make, v.clip_url ? " none yet (made once the clip is written)" : " none");
    }
    return out;
  }

  async function download(path, name, button) {
    button.disabled = true;
    try {
      saveBlob(await request("GET", path, { as: "blob" }), name);
    } catch (error) {
      button.after(` ${errorText(error)}`);
    } finally {
      button.disabled = false;
    }
  }

  async function exportCsv() {
    table.say("Exporting…");
    try {
      const blob = await request("GET", "/api/v1/violations.csv", { params: filters, as: "blob" });
      saveBlob(blob, `violations-${new Date().toISOString().slice(0, 19)}.csv`);
      table.showStatus();
    } catch (error) {
      table.say(`Export failed: ${errorText(error)}`, true);
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    filters = filtersOf(form);
    table.load(true);
  });
  form.querySelector("#export-csv").addEventListener("click", exportCsv);

  const onViolation = (e) => {
    const v = e.detail.violation;
    // a new one belongs at the top of the newest-first list only; sorted otherwise, Apply shows it
    if (!matches(v, filters) || table.has(v.id) || (filters.sort || "-occurred_at") !== "-occurred_at") return;
    table.put(v, { prepend: true }).classList.add("new");
    table.showStatus();
  };
  const onUpdated = (e) => {
    const v = e.detail.violation;
    if (table.has(v.id)) table.put(v);
  };
  const onHistory = (e) => {
    if (selected === e.detail.violation.id) loadHistory(selected);
  };
  const onClip = (e) => {
    if (selected === e.detail.violation_id) select(selected);
  };
  events.addEventListener("violation", onViolation);
  events.addEventListener("violation.updated", onUpdated);
  events.addEventListener("violation.clip_ready", onClip);
  events.addEventListener("violation.evidence_ready", onClip);
  events.addEventListener("violation.updated", onHistory);
  table.load(true);

  return () => {
    events.removeEventListener("violation", onViolation);
    events.removeEventListener("violation.updated", onUpdated);
    events.removeEventListener("violation.clip_ready", onClip);
    events.removeEventListener("violation.evidence_ready", onClip);
    events.removeEventListener("violation.updated", onHistory);
    release();
  };
}
