// Signing in and out, for the console and the stop team's page: a user name and password (a token for
// one shift) or a token; either way the token is kept in this tab's sessionStorage with who it is
// (GET /api/v1/auth/me). Only a token that may read is kept: a publisher's streams only.
import { ApiError, auth, get, request } from "./api.js";

// { me } when signed in, { error } (a sentence for the sign-in form) when not.
export async function signIn({ username, password, token }) {
  try {
    if (username) {
      const signed = await request("POST", "/api/v1/auth/login", { body: { username, password }, token: null });
      token = signed.token;
    }
    auth.set(token);
    const me = await get("/api/v1/auth/me");
    if (!me.access.includes("read")) {
      await signOut();
      return { error: `This ${me.role} token may publish streams but not read violations: use "Stream from this device".` };
    }
    auth.setMe(me);
    return { me };
  } catch (error) {
    auth.clear();
    const refused = {
      login_refused: "Wrong user name or password (or the account is disabled).",
      too_many_attempts: `Too many failed sign-ins: ${error.message}.`,
      unauthorized: "The server refused this token.",
    }[error instanceof ApiError ? error.code : ""];
    return { error: refused || `Cannot reach the server: ${error.message}` };
  }
}

// Sign out: the server forgets a user's or machine's token (the server's own API token stays).
export async function signOut() {
  if (auth.token) {
    try {
      await request("POST", "/api/v1/auth/logout");
    } catch {
      // already refused, or the server's API token (409): nothing to end on the server
    }
  }
  auth.clear();
}

// What the sign-in form asks for: { username, password } or { token }; null when it has neither.
export function credentials(form) {
  const username = form.querySelector("#username").value.trim();
  const token = form.querySelector("#token").value.trim();
  if (username) return { username, password: form.querySelector("#password").value };
  return token ? { token } : null;
}
