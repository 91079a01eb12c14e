// Ramesh's voice and mouth on the watch page (docs/voice.md, "Visemes"): with `voice=1` in the
// page's URL the socket asks for `reply.audio` too, and the "Hear Ramesh" button (browsers start
// audio only after a click) plays it through Web Audio, each chunk queued after the last. Each
// chunk brings its own visemes, [start_ms, viseme] from its first sample; they are placed on the
// audio clock (AudioContext.currentTime) at the time their chunk is scheduled, so the mouth follows
// what is heard, not the wall clock, and a chunk's shapes never wait for a later frame. A barge-in
// (`heard` with interrupted) stops the rest of that reply, sound and mouth together.

export const VISEMES = ["sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou"];
// The mouth as an ellipse: [width, height] in the 40x24 box, by viseme (lips closed for PP, round for ou).
const SHAPES = [[16, 1], [16, 0.5], [15, 3], [15, 4], [15, 6], [15, 8], [11, 7], [17, 4], [15, 6], [11, 8],
                [16, 14], [17, 9], [18, 5], [12, 11], [8, 8]];
const LEAD_S = 0.04; // the mouth moves this much ahead of the sound: lips form before it is heard

const state = { ctx: null, next: 0, marks: [], sources: [], turn: -1, shown: -1, changes: 0, seen: new Set() };

export function voiceWanted() {
  return new URLSearchParams(window.location.search).get("voice") === "1";
}

function panel() {
  return document.getElementById("mouth-panel");
}

export function setUpVoice() {
  const box = panel();
  if (!box || !voiceWanted()) return;
  box.hidden = false;
  const button = document.getElementById("hear");
  button.addEventListener("click", () => {
    if (!state.ctx) state.ctx = new AudioContext();
    state.ctx.resume();
    button.disabled = true;
    button.textContent = "Listening";
    requestAnimationFrame(draw);
  });
  const strip = document.getElementById("viseme-strip");
  strip.replaceChildren(...VISEMES.map((name) => {
    const cell = document.createElement("span");
    cell.textContent = name;
    cell.dataset.viseme = name;
    return cell;
  }));
}

function decode(data) {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  const out = new Float32Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(2 * i, true) / 32768;
  return out;
}

export function onReplyAudio(message) {
  const ctx = state.ctx;
  if (!ctx || !message.data) return;
  if (message.turn !== state.turn) state.turn = message.turn;
  const samples = decode(message.data);
  const buffer = ctx.createBuffer(1, samples.length, message.sample_rate);
  buffer.copyToChannel(samples, 0);
  const source = ctx.createBufferSource();
  source.buffer = buffer;
  source.connect(ctx.destination);
  const at = Math.max(ctx.currentTime + 0.05, state.next);
  source.start(at);
  state.sources.push(source);
  source.onended = () => { state.sources = state.sources.filter((s) => s !== source); };
  state.next = at + buffer.duration;
  for (const [ms, viseme] of message.visemes || []) state.marks.push([at + ms / 1000, viseme]);
  const box = panel();
  if (box) box.dataset.source = message.visemes_source || "";
}

export function onHeard(event) {
  if (!event.interrupted || event.turn !== state.turn) return;
  for (const source of state.sources) source.stop();
  state.sources = [];
  state.marks = [];
  state.next = 0;
}

function draw() {
  const ctx = state.ctx;
  if (ctx) {
    const now = ctx.currentTime + LEAD_S;
    let viseme = state.shown < 0 ? 0 : state.shown;
    while (state.marks.length && state.marks[0][0] <= now) viseme = state.marks.shift()[1];
    if (state.marks.length === 0 && now > state.next + LEAD_S) viseme = 0; // nothing left to say
    if (viseme !== state.shown) show(viseme);
  }
  requestAnimationFrame(draw);
}

function show(viseme) {
  state.shown = viseme;
  state.changes += 1;
  state.seen.add(VISEMES[viseme]);
  const [width, height] = SHAPES[viseme];
  const lips = document.getElementById("lips");
  lips.setAttribute("rx", String(width));
  lips.setAttribute("ry", String(Math.max(0.5, height)));
  const box = panel();
  box.dataset.viseme = VISEMES[viseme];
  box.dataset.changes = String(state.changes);
  box.dataset.seen = [...state.seen].join(" ");
  for (const cell of document.getElementById("viseme-strip").children) {
    cell.classList.toggle("on", cell.dataset.viseme === VISEMES[viseme]);
  }
}
