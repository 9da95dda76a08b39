// The map page (#/map): each violation where the engine placed the vehicle (its GPS position from
// the drone's GPS and gimbal heading), coloured by status, over the site's own map tiles when the
// server has them (settings map_tiles: an MBTiles file, GET /api/v1/map/tiles/...). Leaflet 1.9.4 is
// vendored (vendor/leaflet); tiles are fetched with the bearer header and shown from blob: URLs,
// like snapshots. New violations arrive live.
import { auth, get } from "./api.js";
import { h, num, when } from "./dom.js";

const COLOURS = { enforceable: "#c62828", not_enforceable: "#ef6c00", dismissed: "#757575", legacy: "#6a1b9a" };
const LIMIT = 500; // the newest violations shown

// A tile layer whose tiles are fetched with the token (an <img> cannot send a header).
function tokenTiles(L, info) {
  const Layer = L.GridLayer.extend({
    createTile(coords, done) {
      const img = document.createElement("img");
      img.alt = "";
      fetch(`/api/v1/map/tiles/${coords.z}/${coords.x}/${coords.y}`, { headers: { Authorization: `Bearer ${auth.token}` } })
        .then((r) => (r.ok ? r.blob() : null))
        .then((blob) => {
          if (blob) {
            img.onload = () => URL.revokeObjectURL(img.src);
            img.src = URL.createObjectURL(blob);
          }
          done(null, img);
        })
        .catch((error) => done(error, img));
      return img;
    },
  });
  // beyond the file's deepest zoom its tiles are shown enlarged
  return new Layer({ maxZoom: 22, minNativeZoom: info.minzoom ?? 0, maxNativeZoom: info.maxzoom ?? 19, attribution: info.attribution || "" });
}

function popup(v) {
  const speed = v.ticket_speed_kmh == null ? "no ticket speed" : `${num(v.ticket_speed_kmh)} km/h`;
  return h(
    "div",
    { class: "map-popup" },
    h("strong", {}, `#${v.id} ${speed}`),
    h("br"),
    `${v.status} · limit ${num(v.speed_limit_kmh, 0)} · ${v.zone}`,
    h("br"),
    when(v.occurred_at),
    h("br"),
    h("a", { href: `#/violations?session_id=${encodeURIComponent(v.session_id)}` }, "its session's violations"),
  );
}

export function mount(container, { events }) {
  const L = window.L;
  const note = h("p", { class: "hint", id: "map-note" }, "Loading…");
  const box = h("div", { id: "map", class: "map" });
  container.append(h("h1", {}, "Map"), note, box);
  if (!L) {
    note.textContent = "The map library (vendor/leaflet) did not load.";
    return () => {};
  }
  const map = L.map(box, { zoomControl: true, fadeAnimation: false });
  const layer = L.featureGroup().addTo(map);
  const shown = new Set();
  let placed = 0;
  let unplaced = 0;

  function add(v) {
    if (shown.has(v.id)) return;
    shown.add(v.id);
    if (v.latitude == null || v.longitude == null) {
      unplaced += 1;
      return;
    }
    placed += 1;
    const marker = L.circleMarker([v.latitude, v.longitude], { radius: 7, color: COLOURS[v.status] || "#333", weight: 2, fillOpacity: 0.6 });
    marker.violationId = v.id;
    marker.bindPopup(() => popup(v)).addTo(layer);
    label(marker);
  }

  // the marker's SVG element says which violation it is (drawn once the map has a view)
  function label(marker) {
    marker.getElement()?.setAttribute("data-id", marker.violationId);
  }

  function say(tiles) {
    const base = tiles ? "" : "This server has no map tiles (settings map_tiles: an MBTiles file): positions only. ";
    note.textContent = `${base}${placed} violations placed${unplaced ? `, ${unplaced} without a position (no GPS or gimbal yaw)` : ""}.`;
  }

  let tiles = false;
  (async () => {
    try {
      const info = await get("/api/v1/map");
      tiles = info.tiles;
      if (tiles) tokenTiles(L, info).addTo(map);
      const page = await get("/api/v1/violations", { limit: LIMIT });
      page.items.forEach(add);
      if (placed) map.fitBounds(layer.getBounds().pad(0.2), { maxZoom: 17 });
      else if (info.center) map.setView([info.center[1], info.center[0]], info.center[2] ?? 12);
      else map.setView([0, 0], 2);
      layer.eachLayer(label);
      say(tiles);
      box.dataset.ready = "true";
    } catch (error) {
      note.textContent = `The map cannot be shown: ${error.message}`;
    }
  })();

  const onViolation = (e) => {
    add(e.detail.violation);
    say(tiles);
  };
  events?.addEventListener("violation", onViolation);
  return () => {
    events?.removeEventListener("violation", onViolation);
    map.remove();
  };
}
