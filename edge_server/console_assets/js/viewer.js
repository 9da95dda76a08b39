// Watching a live stream's annotated video: a receive-only WebRTC peer, offered to
// POST /api/v1/sessions/{id}/viewers; close() ends it (DELETE, then the peer).
import { del, request } from "./api.js";

export class Viewer {
  constructor(sessionId, video, onState) {
    this.sessionId = sessionId;
    this.video = video;
    this.onState = onState;
    this.pc = null;
    this.viewerId = null;
  }

  async open() {
    const pc = new RTCPeerConnection();
    this.pc = pc;
    pc.addTransceiver("video", { direction: "recvonly" });
    pc.addEventListener("track", (e) => {
      this.video.srcObject = e.streams[0] || new MediaStream([e.track]);
    });
    pc.addEventListener("connectionstatechange", () => this.onState(pc.connectionState));
    await pc.setLocalDescription(await pc.createOffer());
    await new Promise((resolve) => {
      if (pc.iceGatheringState === "complete") return resolve();
      pc.addEventListener("icegatheringstatechange", () => pc.iceGatheringState === "complete" && resolve());
      setTimeout(resolve, 3000);
    });
    const answer = await request("POST", `/api/v1/sessions/${encodeURIComponent(this.sessionId)}/viewers`, {
      body: { sdp: pc.localDescription.sdp, type: "offer" },
    });
    this.viewerId = answer.viewer_id;
    await pc.setRemoteDescription({ type: "answer", sdp: answer.sdp });
  }

  // The server hears of it first (DELETE), then the peer closes: closed first, the peer's end could
  // reach the server before the DELETE, which would then name a viewer already gone.
  async close() {
    const id = this.viewerId;
    const pc = this.pc;
    this.viewerId = null;
    this.pc = null;
    this.video.srcObject = null;
    if (id) await del(`/api/v1/sessions/${encodeURIComponent(this.sessionId)}/viewers/${id}`).catch(() => {});
    if (pc) pc.close();
  }
}
