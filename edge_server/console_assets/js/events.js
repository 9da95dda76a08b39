// The server's live events (GET /api/v1/events, a WebSocket), re-dispatched by type; reconnects
// with back-off, and says so, when the link drops.
export class EventStream extends EventTarget {
  constructor(token) {
    super();
    this.token = token;
    this.socket = null;
    this.connected = false;
    this.stopped = false;
    this.delay = 500;
  }

  start() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${scheme}//${location.host}/api/v1/events?token=${encodeURIComponent(this.token)}`;
    const socket = new WebSocket(url);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.delay = 500;
      this.setConnected(true);
    });
    socket.addEventListener("message", (message) => {
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      this.dispatchEvent(new CustomEvent(event.type, { detail: event }));
    });
    socket.addEventListener("close", (close) => {
      this.setConnected(false);
      if (this.stopped) return;
      if (close.code === 1008) {
        window.dispatchEvent(new CustomEvent("airpatrol:unauthorized"));
        return;
      }
      setTimeout(() => this.stopped || this.start(), this.delay);
      this.delay = Math.min(this.delay * 2, 10000);
    });
  }

  setConnected(value) {
    this.connected = value;
    this.dispatchEvent(new CustomEvent("link", { detail: { connected: value } }));
  }

  stop() {
    this.stopped = true;
    if (this.socket) this.socket.close();
  }
}
