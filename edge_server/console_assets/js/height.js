// A live stream's height above the road (PUT / DELETE /api/v1/sessions/{id}/height-reference).
// A drone reports its height above its take-off point, and every speed scales with its height above
// the road: the officer measures a base (freezes a frame of the stream: the server keeps it and the
// console shows its image; clicks the two ends of each stretch of known length on the road, types
// the lengths; the server solves it on that very frame, with its altitude reading and pitch) or types
// the take-off point's height above the road.
import { del, get, post, put, request } from "./api.js";
import { errorText, h, num, scaleText, signed, when } from "./dom.js";


// The solution of a measured base in one line.
export function solutionText(s) {
  const pitch = s.pitch_solved
    ? `pitch bias ${signed(s.pitch_bias_deg)} ± ${num(s.pitch_sigma_deg, 2)}°`
    : `pitch not determined (lines in one direction): ± ${num(s.pitch_sigma_deg, 2)}°`;
  const residuals = s.residuals_m.map((r) => signed(r)).join(", ");
  return `${num(s.height_above_road_m, 2)} ± ${num(s.height_sigma_m, 2)} m above the road (take-off ${signed(s.takeoff_above_road_m)} m above it), ${pitch}; residuals ${residuals} m`;
}

function stateText(state) {
  const ref = state.reference;
  const now =
    state.origin === "none"
      ? "Now: the drone's altitude over unknown ground (no height reference)."
      : `Now (${state.origin === "session" ? "this stream's" : "the site configuration's"}): ${ref.detail || `take-off ${signed(ref.takeoff_above_road_m)} m above the road`}${ref.set_by ? `, set by ${ref.set_by}` : ""}${ref.set_at ? ` at ${when(ref.set_at)}` : ""}.`;
  return `${now} Latest frame: ${state.scale ? scaleText(state.scale, false) : "no speeds"}.`;
}

// An image from the API (it needs the bearer header), decoded once to draw from.
async function loadImage(path) {
  return createImageBitmap(await request("GET", path, { as: "blob" }));
}

// The tool for one stream's card.
export function heightTool(sessionId) {
  const path = `/api/v1/sessions/${encodeURIComponent(sessionId)}/height-reference`;
  const note = h("p", { class: "status", role: "status" });
  const say = (text, bad = false) => {
    note.textContent = text;
    note.classList.toggle("error", bad);
  };
  const current = h("p", { class: "hint current" }, "…");
  const name = h("input", { name: "set_by", maxlength: 80, placeholder: "name or badge number", autocomplete: "off" });
  const number = (label, field, attrs) => h("label", {}, label, h("input", { name: field, type: "number", step: "any", ...attrs }));
  const site = h(
    "form",
    { class: "operator height-site" },
    number("Take-off above the road (m)", "takeoff_above_road_m", { min: -500, max: 500, required: true, placeholder: "+ above, − below" }),
    number("± (m)", "sigma_m", { min: 0.01, max: 100, placeholder: "configured" }),
    h("button", { type: "submit" }, "Apply take-off height"),
  );
  const canvas = h("canvas", { class: "base-canvas", hidden: true, title: "click the two ends of a stretch of known length" });
  const list = h("ol", { class: "base-lines" });
  const freeze = h("button", { type: "button", class: "freeze" }, "Freeze frame");
  const solve = h("button", { type: "button", class: "solve", disabled: true }, "Solve and apply");
  const reset = h("button", { type: "button", class: "quiet reset" }, "Back to the configuration's");
  const element = h(
    "section",
    { class: "height-tool" },
    h("h3", {}, "Height above the road"),
    current,
    h("label", { class: "who" }, "Your name", name),
    h("h4", {}, "Measure a base"),
    h("p", { class: "hint" }, "Freeze a frame, click the two ends of a stretch of known length on the road (dashes, a stop line to a sign), type its length; lines in two directions also measure the gimbal's pitch. The lines are solved on the frame frozen, however the drone moves meanwhile."),
    h("div", { class: "actions" }, freeze, solve),
    canvas,
    list,
    h("h4", {}, "Or the take-off point's height above the road"),
    site,
    reset,
    note,
  );

  let frame = null; // the frozen frame as the server keeps it ({frame_index, width, height, ...})
  let still = null; // its image
  let lines = []; // [{a: [x, y], b: [x, y], input}] in canvas pixels
  let pending = null;

  let shown = null; // the last state shown
  const show = (state) => {
    shown = state;
    current.textContent = stateText(state);
  };
  // The latest frame's scale, from the stream's stats: the reference set shows from its next frame.
  const showScale = (scale) => {
    if (shown) show({ ...shown, scale });
  };

  function redraw() {
    const ctx = canvas.getContext("2d");
    ctx.drawImage(still, 0, 0);
    ctx.lineWidth = Math.max(1, canvas.width / 320);
    ctx.strokeStyle = ctx.fillStyle = "#ffd400";
    ctx.font = `${Math.round(canvas.width / 30)}px system-ui`;
    lines.forEach(({ a, b }, i) => {
      ctx.beginPath();
      ctx.moveTo(...a);
      ctx.lineTo(...b);
      ctx.stroke();
      ctx.fillText(String(i + 1), (a[0] + b[0]) / 2 + 3, (a[1] + b[1]) / 2 - 3);
    });
    if (pending) ctx.fillRect(pending[0] - 2, pending[1] - 2, 4, 4);
    solve.disabled = lines.length === 0;
  }

  function addLine(a, b) {
    const input = h("input", { type: "number", class: "length", step: "any", min: 0.5, max: 1000, placeholder: "length (m)", required: true });
    const line = { a, b, input };
    const remove = h("button", { type: "button", class: "quiet" }, "Remove");
    const px = (p) => `(${toFrame(p).map((v) => v.toFixed(0)).join(", ")})`;
    const item = h("li", {}, `${px(a)} → ${px(b)} px `, input, " m ", remove);
    remove.addEventListener("click", () => {
      lines = lines.filter((l) => l !== line);
      item.remove();
      redraw();
    });
    lines.push(line);
    list.append(item);
    input.focus();
  }

  canvas.addEventListener("click", (e) => {
    const box = canvas.getBoundingClientRect();
    const point = [((e.clientX - box.left) * canvas.width) / box.width, ((e.clientY - box.top) * canvas.height) / box.height];
    if (pending) {
      addLine(pending, point);
      pending = null;
    } else {
      pending = point;
    }
    redraw();
  });

  freeze.addEventListener("click", async () => {
    freeze.disabled = true;
    try {
      const frozen = await post(`${path}/frames`);
      still = await loadImage(frozen.image);
      frame = frozen;
      canvas.width = frozen.width;
      canvas.height = frozen.height;
      canvas.hidden = false;
      lines = [];
      pending = null;
      list.replaceChildren();
      redraw();
      canvas.scrollIntoView({ block: "nearest" });
      const reading = frame.altitude_m === null ? "no altitude reading" : `the drone read ${num(frame.altitude_m, 1)} m`;
      say(`Frame ${frame.frame_index} frozen (${num(frame.time_s, 1)} s, ${reading}): click the two ends of each stretch, then type its length.`);
    } catch (error) {
      say(`Cannot freeze a frame: ${errorText(error)}`, true);
    } finally {
      freeze.disabled = false;
    }
  });

  // A frozen pixel -> the stream's frame pixel (the canvas is the frame's own size: the identity).
  const toFrame = ([x, y]) => [(x * frame.width) / canvas.width, (y * frame.height) / canvas.height];

  async function send(body, what) {
    if (!name.value.trim()) {
      say("Type your name first: it is recorded on every violation measured with it.", true);
      name.focus();
      return;
    }
    try {
      const state = await put(path, { ...body, set_by: name.value.trim() });
      show(state);
      say(`Applied from the next frame: ${state.solution ? solutionText(state.solution) : state.reference.detail}`);
    } catch (error) {
      say(`${what} not applied: ${errorText(error)}`, true);
    }
  }

  solve.addEventListener("click", () => {
    const missing = lines.findIndex((l) => l.input.value === "");
    if (missing >= 0) {
      say(`Type the length of line ${missing + 1}.`, true);
      lines[missing].input.focus();
      return;
    }
    const body = lines.map((l) => ({ p1: toFrame(l.a), p2: toFrame(l.b), length_m: Number(l.input.value) }));
    send({ lines: body, frame_index: frame.frame_index }, "The base is");
  });

  site.addEventListener("submit", (e) => {
    e.preventDefault();
    const body = { takeoff_above_road_m: Number(site.elements.takeoff_above_road_m.value) };
    if (site.elements.sigma_m.value !== "") body.sigma_m = Number(site.elements.sigma_m.value);
    send(body, "The take-off height is");
  });

  reset.addEventListener("click", async () => {
    try {
      show(await del(path));
      say("Back to the configuration's height reference from the next frame.");
    } catch (error) {
      say(`Not changed: ${errorText(error)}`, true);
    }
  });

  get(path)
    .then(show)
    .catch((error) => say(`Cannot read the height reference: ${errorText(error)}`, true));
  return { element, show, showScale };
}
