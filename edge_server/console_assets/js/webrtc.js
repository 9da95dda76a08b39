// WebRTC in the console: the ICE wait both offers need, and watching a stream's annotated video.
import { del, request } from "./api.js";

// The server does no trickle ICE: an offer goes once its candidates are gathered (or after
// timeoutMs, with those gathered so far: host ones come first).
export function iceGathered(peer, timeoutMs = 3000) {
  if (peer.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    peer.addEventListener("icegatheringstatechange", () => peer.iceGatheringState === "complete" && resolve());
    setTimeout(resolve, timeoutMs);
  });
}

// A receive-only peer offered to POST /api/v1/sessions/{id}/viewers; close() ends it.

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
    await iceGathered(pc);
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
