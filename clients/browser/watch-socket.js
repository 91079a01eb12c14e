// The watch page's socket: connects to /ws/sessions/{id} with a spectator token and applies the
// session stream by the rules of docs/protocol.md section 5: keep lastSeq, apply only lastSeq + 1,
// drop anything older, and after a reconnect (or a gap) send `resume` and let the replay or a
// `snapshot` fill in. It never sends `transcript` or `scene`: only `resume`.

import { Backoff, setCurrency, wsUrl } from "./common.js";
import { render, renderStream, setStatus, showFatal } from "./watch-render.js";
import { showPartial, showReplyTimings, showSpeech, showSpoken } from "./watch-speech.js";
import { onHeard, onReplyAudio, voiceWanted } from "./watch-voice.js";
import { apply, conversation, model, rebuild, streamDelta, streamWithdrawn, view } from "./watch-state.js";

// Close codes after which reconnecting cannot help (docs/protocol.md section 6).
const FATAL = {
  4401: "This link's token is missing, wrong or expired. Ask for a new watch link.",
  4403: "This link's token is for another session.",
  4404: "No such session: it has ended and been cleared, or the link is wrong.",
  4409: "Superseded by a newer connection.",
};

let path = ""; // /ws/sessions/{id}?token=..., set by start()
let ws = null;
let welcomed = false;
let resumeId = null;
let resumeCount = 0;
let holdUntil = 0;
let fatal = null;
const backoff = new Backoff();

// Connects, and reconnects whenever the close code allows it.
export function start(sessionId, token) {
  path = `/ws/sessions/${encodeURIComponent(sessionId)}?token=${encodeURIComponent(token)}`;
  if (voiceWanted()) path += "&voice=1"; // Ramesh's voice and visemes for this page (watch-voice.js)
  connect();
}

function connect() {
  const url = wsUrl(path);
  const sock = new WebSocket(url, ["samvad.v1.json"]);
  ws = sock;
  sock.onmessage = (event) => {
    if (sock !== ws) return;
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      return;
    }
    handle(message);
  };
  sock.onclose = (event) => {
    if (sock === ws) closed(event.code);
  };
}

function closed(code) {
  ws = null;
  resumeId = null;
  view.connected = false;
  if (FATAL[code]) {
    fatal = FATAL[code];
    setStatus("failed", "not connected");
    showFatal(fatal);
    return;
  }
  setStatus("reconnecting", "reconnecting…");
  const wait = Math.max(backoff.take(), holdUntil - Date.now());
  setTimeout(connect, wait);
}

// Test hook: close the socket as a network drop would. `holdMs` keeps it down that long.
export function dropSocket({ holdMs = 0 } = {}) {
  holdUntil = Date.now() + holdMs;
  if (ws) ws.close(4000, "dropped by samvadView.dropSocket");
}

function send(message) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
}

function askResume() {
  resumeId = `resume-${++resumeCount}`;
  view.resumes += 1;
  send({ type: "resume", id: resumeId, last_seq: view.lastSeq });
}

function handle(message) {
  switch (message.type) {
    case "welcome":
      welcome(message);
      return;
    case "ack":
      if (message.id && message.id === resumeId) resumeId = null;
      return;
    case "reply.delta":
      if (streamDelta(message)) renderStream();
      return;
    case "reply.withdrawn":
      if (streamWithdrawn(message)) renderStream();
      return;
    case "reply.audio":
      onReplyAudio(message);
      return;
    case "reply.spoken":
      showSpoken(message);
      return;
    case "error":
      console.warn("samvad:", message.code, message.message);
      return;
    default:
      if (typeof message.seq === "number") sequenced(message);
  }
}

function welcome(message) {
  view.connected = true;
  backoff.reset();
  if (!welcomed) {
    welcomed = true;
    view.lastSeq = message.seq;
    rebuild(message.state);
    loadScenario(message.state.scenario);
  } else {
    view.reconnects += 1;
    if (message.seq > view.lastSeq) askResume();
    else if (message.seq < view.lastSeq) {
      // The server lost events we had seen (a restart without the mirror): start from its state.
      const seen = view.lastSeq;
      view.lastSeq = message.seq;
      rebuild(message.state, seen);
    }
  }
  render();
}

// The vendor's name, place and currency come from the session's scenario pack (GET /api/scenarios).
async function loadScenario(id) {
  try {
    const response = await fetch("/api/scenarios");
    const pack = (await response.json()).scenarios.find((s) => s.id === id);
    if (!pack) return;
    model.vendor = { name: pack.vendor, place: pack.place, stall: "stall" };
    setCurrency(pack.currency);
    view.scenario = pack.id;
    for (const key of model.entries.keys()) conversation.staleKeys.add(key); // redraw with the name
    conversation.dirty = true;
    render();
  } catch (error) {
    console.warn("scenario details unavailable", error); // the page keeps its defaults
  }
}

function sequenced(event) {
  if (event.type === "snapshot") {
    view.snapshots += 1;
    const seen = view.lastSeq;
    view.lastSeq = event.seq;
    rebuild(event.state, seen);
    render();
    return;
  }
  if (event.seq <= view.lastSeq) return; // seen already
  if (event.seq !== view.lastSeq + 1) {
    if (resumeId === null) askResume(); // a gap: the replay brings it in order
    return;
  }
  apply(event);
  if (event.type === "heard") onHeard(event);
  if (event.type === "speech") showSpeech(event);
  if (event.type === "speech.partial") showPartial(event);
  if (event.type === "reply") showReplyTimings(event);
  view.lastSeq = event.seq;
  view.applied += 1;
  render();
}
