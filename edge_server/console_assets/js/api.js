// The API as the console uses it: every call carries the operator's token as a bearer header.
import { shortId } from "./dom.js";

const KEY = "airpatrol.token";
const ME = "airpatrol.me";

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail || code);
    this.status = status;
    this.code = code;
  }
}

export const auth = {
  get token() {
    return sessionStorage.getItem(KEY);
  },
  set(token) {
    sessionStorage.setItem(KEY, token);
  },
  // who the token is (GET /api/v1/auth/me): name, role, and what the role may do
  get me() {
    try {
      return JSON.parse(sessionStorage.getItem(ME) || "null");
    } catch {
      return null;
    }
  },
  setMe(me) {
    sessionStorage.setItem(ME, JSON.stringify(me));
  },
  clear() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(ME);
  },
};

// Whether the signed-in role may do something (read, publish, operate, admin). The server checks
// every request itself; the console only leaves out what would be refused.
export const may = (access) => (auth.me?.access || []).includes(access);

function detailText(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) return detail.map((d) => `${d.loc || ""}: ${d.msg || JSON.stringify(d)}`).join("; ");
  return JSON.stringify(detail);
}

export async function request(method, path, { params, body, as = "json", token } = {}) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  const headers = token === null ? {} : { Authorization: `Bearer ${token || auth.token || ""}` };
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch(url, { method, headers, body: payload, cache: "no-store" });
  if (!response.ok) {
    let code = `http_${response.status}`;
    let detail = response.statusText;
    try {
      const error = await response.json();
      code = error.error || code;
      detail = detailText(error.detail);
    } catch {
      // not JSON: keep the status text
    }
    if (response.status === 401 && token !== null) window.dispatchEvent(new CustomEvent("airpatrol:unauthorized"));
    throw new ApiError(response.status, code, detail);
  }
  if (as === "blob") return response.blob();
  if (response.status === 204) return null;
  return response.json();
}

export const get = (path, params) => request("GET", path, { params });
export const put = (path, body) => request("PUT", path, { body });
export const post = (path, body) => request("POST", path, { body });
export const del = (path) => request("DELETE", path);

// A snapshot or clip as a blob: URL (an <img> or <video> cannot send the bearer header).
export async function objectUrl(path) {
  return URL.createObjectURL(await request("GET", path, { as: "blob" }));
}

// Where to end a live stream of each kind.
export function stopPath(session) {
  const id = encodeURIComponent(session.id);
  return {
    webrtc: `/api/v1/webrtc/${id}`,
    whip: `/whip/${id}`,
    rtmp: `/api/v1/rtmp/streams/${id}`,
    rtsp: `/api/v1/rtsp/${id}`,
  }[session.kind];
}

// End a live stream, once the operator confirms: the DELETE's answer, or null when not confirmed.
export async function endStream(session) {
  if (!confirm(`End the ${session.kind} stream ${shortId(session.id)}? Its violations and clips are kept.`)) return null;
  return del(stopPath(session));
}
