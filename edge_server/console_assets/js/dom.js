// Elements are built, never parsed from strings: nothing the server returns is ever HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });

export function when(iso) {
  return iso ? dateFormat.format(new Date(iso)) : "–";
}

export function num(value, digits = 1) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

export function shortId(id) {
  return id ? id.slice(0, 8) : "–";
}

export function errorText(error) {
  return error && error.message ? error.message : String(error);
}

// A violation's status as the console names it (the API's status field).
export const STATUS_LABELS = {
  enforceable: "enforceable",
  not_enforceable: "not enforceable",
  dismissed: "dismissed",
  legacy: "legacy: peak only",
};

export function statusBadge(v) {
  const status = v.status || "legacy";
  return h("span", { class: `badge status ${status}`, title: v.status_reason || null }, STATUS_LABELS[status] || status);
}

// The speed a violation is shown with: the ticket speed ± its sigma, "—" when it has none (no
// measuring base, or stored before the ticket speed). The per-frame peak is never this number.
export function ticketSpeed(v, unit = "") {
  if (v.ticket_speed_kmh === null || v.ticket_speed_kmh === undefined) return "—";
  return `${num(v.ticket_speed_kmh)}${unit} ± ${num(v.ticket_sigma_kmh)}`;
}

// Where a speed's scale came from (the API's scale.source): every speed scales with the camera's
// height above the road, and a drone reports its height above its take-off point.
export const SCALE_LABELS = {
  flight: "drone altitude over unknown ground",
  operator: "operator's altitude over unknown ground",
  site: "take-off height above the road",
  measured_base: "measured base",
  lrf: "laser rangefinder",
  terrain: "terrain model of the site",
  vehicles: "the vehicles' sizes (no altitude)",
};

// A scale as one line: "measured base, 59.4 ± 0.4 m above the road, pitch ± 0.3°, ±0.8 % of the
// speed; set by officer 12 at ..." (who set it with `who`).
// The scale check from the vehicles (issue 40): "ok: 0.99 ± 0.01 from 42 vehicles", or why not.
export function scaleCheckText(check) {
  if (!check) return "not made";
  const rulers = check.rulers || [];
  const each = rulers.map((r) => `${r.ruler} ${num(r.ratio, 3)} ± ${num(r.sigma, 3)} (${r.n} ${r.ruler === "cars" ? "vehicles" : "lane frames"})`).join(", ");
  let figures = "";
  if (check.ratio != null && rulers.some((r) => r.ruler !== "cars")) {
    figures = `: the telemetry's scale ${num(check.ratio, 3)} ± ${num(check.sigma, 3)} times the road's, from ${each}`;
  } else if (check.ratio != null) {
    figures = `: the cars measure ${num(check.ratio, 3)} ± ${num(check.sigma, 3)} of their size from ${check.n} vehicles`;
  } else if (each) {
    figures = `: ${each}`;
  }
  return `${check.status}${figures}${check.reason ? ` (${check.reason})` : ""}`;
}

export function pitchCheckText(check) {
  if (!check) return "not made";
  const figures = check.pitch_error_deg == null ? "" : `: the pitch used is ${num(check.pitch_error_deg, 2)} ± ${num(check.sigma_deg, 2)}° off the traffic's (${check.vehicles} vehicles)`;
  return `${check.status}${figures}${check.reason ? ` (${check.reason})` : ""}`;
}

export const signed = (value, digits = 2) => (value === null || value === undefined ? "–" : `${value >= 0 ? "+" : ""}${num(value, digits)}`);

export function scaleText(scale, who = true) {
  if (!scale) return "–";
  let text = `${SCALE_LABELS[scale.source] || scale.source}, ${num(scale.height_above_road_m)} ± ${num(scale.height_sigma_m)} m above the road, pitch ± ${num(scale.pitch_sigma_deg)}°`;
  if (scale.pitch_from_traffic_deg) text += ` (${signed(scale.pitch_from_traffic_deg)}° from the traffic)`;
  if (scale.sigma_pct !== null && scale.sigma_pct !== undefined) text += `, ±${num(scale.sigma_pct)} % of the speed`;
  const ref = scale.reference;
  if (ref && ref.provisional) text += "; provisional: too few laser readings for a ticket yet";
  if (who && ref && (ref.set_by || ref.set_at)) text += `; set by ${ref.set_by || "?"}${ref.set_at ? ` at ${when(ref.set_at)}` : ""}`;
  return text;
}
