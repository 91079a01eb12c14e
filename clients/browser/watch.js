// The watch page: one session, read-only, live.
//
// It connects to /ws/sessions/{id} with a spectator token and applies the session stream by the
// rules of docs/protocol.md section 5: keep lastSeq, apply only lastSeq + 1, drop anything older,
// and after a reconnect (or a gap) send `resume` and let the replay or a `snapshot` fill in.
// It never sends `transcript` or `scene`: only `resume`.

import {
  Backoff, MOODS, OUTCOME_TITLES, h, moodColor, moodFor, ms, rupees, stageColor, wsUrl,
} from "./common.js";

const params = new URLSearchParams(location.search);
const sessionId = params.get("session") || "";
const token = params.get("token") || "";

// Close codes after which reconnecting cannot help (docs/protocol.md section 6).
const FATAL = {
  4401: "This link's token is missing, wrong or expired. Ask for a new watch link.",
  4403: "This link's token is for another session.",
  4404: "No such session: it has ended and been cleared, or the link is wrong.",
  4409: "Superseded by a newer connection.",
};

// Order of the lines of one turn: learner, vendor; lines after the end come last, by seq.
const RANK = { learner: 0, vendor: 1, "late-learner": 2, "late-vendor": 3 };

const model = {
  state: null, // the scalar facts of SessionState, kept current by the events
  lines: new Map(), // key -> {key, turn, role, rank, seq, text, meta}
  happiness: new Map(), // turn -> score
  quotes: new Map(), // turn -> rupees
  offers: new Map(), // turn -> rupees
  stages: [], // {turn, from, to, forced}
  timings: new Map(), // turn -> timings (never in snapshots, so kept across them)
  summary: null,
  stream: null, // {turn, text, withdrawn}
};

const view = {
  lastSeq: 0,
  turnsShown: 0,
  connected: false,
  reconnects: 0,
  snapshots: 0,
  resumes: 0,
  deltas: 0,
  withdrawals: 0,
  applied: 0,
  status: "connecting",
  dropSocket,
  points: () => ({
    happiness: model.happiness.size,
    quotes: model.quotes.size,
    offers: model.offers.size,
    stages: model.stages.length,
    timings: model.timings.size,
  }),
  lines: () => sortedLines().map(({ turn, role, text }) => ({ turn, role, text })),
};
window.samvadView = view;

// ------------------------------------------------------------------------------- the socket

let ws = null;
let welcomed = false;
let resumeId = null;
let resumeCount = 0;
let holdUntil = 0;
let fatal = null;
const backoff = new Backoff();

function connect() {
  const url = wsUrl(`/ws/sessions/${encodeURIComponent(sessionId)}?token=${encodeURIComponent(token)}`);
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
function dropSocket({ holdMs = 0 } = {}) {
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
      delta(message);
      return;
    case "reply.withdrawn":
      withdrawn(message);
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
  } else {
    view.reconnects += 1;
    if (message.seq > view.lastSeq) askResume();
    else if (message.seq < view.lastSeq) {
      // The server lost events we had seen (a restart without the mirror): start from its state.
      view.lastSeq = message.seq;
      rebuild(message.state);
    }
  }
  render();
}

function sequenced(event) {
  if (event.type === "snapshot") {
    view.snapshots += 1;
    view.lastSeq = event.seq;
    rebuild(event.state);
    render();
    return;
  }
  if (event.seq <= view.lastSeq) return; // seen already
  if (event.seq !== view.lastSeq + 1) {
    if (resumeId === null) askResume(); // a gap: the replay brings it in order
    return;
  }
  apply(event);
  view.lastSeq = event.seq;
  view.applied += 1;
  render();
}

// ------------------------------------------------------------------------------- the model

function rebuild(state) {
  model.state = { ...state };
  model.lines.clear();
  for (const line of state.transcript || []) {
    addLine({ turn: line.turn, role: line.role, rank: RANK[line.role], seq: 0, text: line.text });
  }
  model.happiness = new Map((state.happiness_history || []).map((p) => [p.turn, p.value]));
  model.quotes = new Map((state.quotes || []).map((p) => [p.turn, p.value]));
  model.offers = new Map((state.offers || []).map((p) => [p.turn, p.value]));
  model.stages = (state.stage_changes || []).map((c) => ({
    turn: c.turn, from: c.from_stage, to: c.to_stage, forced: false,
  }));
  model.summary = state.summary || null;
  if (model.stream && model.stream.turn <= state.turn) model.stream = null;
  conversationDirty = true;
}

const staleKeys = new Set(); // lines shown already whose text or tags changed

function addLine(line) {
  const key = line.rank >= 2 ? `${line.rank}:${line.seq}` : `${line.turn}:${line.role}`;
  const existing = model.lines.get(key);
  if (existing) staleKeys.add(key);
  model.lines.set(key, { ...existing, ...line, key });
}

function apply(event) {
  const state = model.state;
  switch (event.type) {
    case "reply": {
      const late = state.is_terminal; // a reply to a transcript sent after the end
      if (event.learner_text) {
        addLine({
          turn: event.turn, role: "learner", rank: late ? 2 : 0, seq: event.seq,
          text: event.learner_text,
          meta: { offer: event.learner_offer, assessment: event.offer_assessment },
        });
      }
      addLine({
        turn: event.turn, role: "vendor", rank: late ? 3 : 1, seq: event.seq, text: event.text,
        meta: {
          mood: event.vendor_mood, happiness: event.happiness_score, stage: event.negotiation_state,
          quote: event.counter_price, fallback: event.fallback, flags: event.flags || [],
        },
      });
      if (!late) {
        model.happiness.set(event.turn, event.happiness_score);
        if (event.counter_price !== null && event.counter_price !== undefined) {
          model.quotes.set(event.turn, event.counter_price);
        }
        if (event.learner_offer !== null && event.learner_offer !== undefined) {
          model.offers.set(event.turn, event.learner_offer);
          state.last_offer = event.learner_offer;
        }
        if (event.timings) model.timings.set(event.turn, event.timings);
      }
      state.turn = Math.max(state.turn, event.turn);
      state.stage = event.negotiation_state;
      state.happiness_score = event.happiness_score;
      state.vendor_mood = event.vendor_mood;
      state.vendor_quote = event.counter_price;
      state.item = event.item ?? state.item;
      state.is_terminal = state.is_terminal || event.is_terminal;
      if (model.stream && model.stream.turn <= event.turn) model.stream = null;
      conversationDirty = true;
      return;
    }
    case "mood":
      model.happiness.set(event.turn, event.happiness_score);
      state.happiness_score = event.happiness_score;
      state.vendor_mood = event.vendor_mood;
      return;
    case "stage":
      if (!model.stages.some((s) => s.turn === event.turn && s.to === event.to)) {
        model.stages.push({ turn: event.turn, from: event.from, to: event.to, forced: event.forced });
      }
      state.stage = event.to;
      return;
    case "session.ended":
      model.summary = event.summary;
      state.outcome = event.outcome;
      state.is_terminal = true;
      return;
    default:
      return; // a sequenced event this page does not know: the seq still counts
  }
}

function delta(message) {
  view.deltas += 1;
  const state = model.state;
  if (!state || message.turn <= state.turn) return; // that turn is answered already
  if (!model.stream || model.stream.turn !== message.turn) {
    model.stream = { turn: message.turn, text: "", withdrawn: null };
  }
  model.stream.text += message.text;
  model.stream.withdrawn = null;
  renderStream();
}

function withdrawn(message) {
  view.withdrawals += 1;
  if (model.stream && model.stream.turn === message.turn) {
    model.stream.text = "";
    model.stream.withdrawn = message.reason || "withdrawn";
    renderStream();
  }
}

// ------------------------------------------------------------------------------- rendering

const $ = (id) => document.getElementById(id);
let conversationDirty = true;

function sortedLines() {
  return [...model.lines.values()].sort(
    (a, b) => a.turn - b.turn || a.rank - b.rank || a.seq - b.seq,
  );
}

function setStatus(state, text) {
  view.status = state;
  const node = $("status");
  node.dataset.state = state;
  node.textContent = text;
}

function showFatal(text) {
  const node = $("fatal");
  node.textContent = text;
  node.hidden = false;
}

function render() {
  if (!model.state) return;
  renderHeader();
  if (conversationDirty) renderConversation();
  renderStream();
  renderCharts();
  renderStages();
  renderTimings();
  renderOutcome();
}

function renderHeader() {
  const s = model.state;
  $("learner").textContent = s.learner_id || "anonymous";
  $("item").textContent = s.item || "–";
  $("turn").textContent = `${s.turn} / ${s.max_turns}`;
  $("quote").textContent = rupees(s.vendor_quote);
  $("offer").textContent = rupees(s.last_offer);
  const stage = $("stage");
  stage.textContent = s.stage;
  stage.style.background = stageColor(s.stage);
  stage.dataset.stage = s.stage;
  const mood = $("mood");
  mood.textContent = `${s.vendor_mood} · ${s.happiness_score}`;
  mood.style.background = moodColor(s.vendor_mood);
  mood.dataset.mood = s.vendor_mood;
  if (view.connected) {
    setStatus(s.is_terminal ? "ended" : "live", s.is_terminal ? "ended" : "live");
  }
}

function lineNode(line) {
  const meta = line.meta || {};
  const bits = [];
  if (line.role === "vendor" && line.rank === 1) {
    bits.push(h("span", { class: "tag", style: { background: moodColor(meta.mood) } },
      `${meta.mood} ${meta.happiness}`));
    if (meta.quote !== null && meta.quote !== undefined) {
      bits.push(h("span", { class: "tag quote" }, `quote ${rupees(meta.quote)}`));
    }
    if (meta.fallback) bits.push(h("span", { class: "tag warn" }, "fallback line"));
    for (const flag of meta.flags || []) {
      if (flag !== "fallback") bits.push(h("span", { class: "tag flag" }, flag.replace("_", " ")));
    }
  }
  if (line.role === "learner" && meta.offer !== null && meta.offer !== undefined) {
    bits.push(h("span", { class: "tag offer" }, `offer ${rupees(meta.offer)}`));
    if (meta.assessment && meta.assessment !== "none") {
      bits.push(h("span", { class: `tag assess assess-${meta.assessment}` }, meta.assessment));
    }
  }
  const who = line.role === "learner" ? (model.state.learner_id || "Learner") : "Ramesh";
  return h("div", {
    class: `line ${line.role}${line.rank >= 2 ? " late" : ""}`,
    dataset: { key: line.key, turn: line.turn, role: line.role },
  },
  h("div", { class: "who" }, h("span", { class: "turn-no" }, `T${line.turn}`), who),
  h("div", { class: "bubble" }, line.text),
  bits.length ? h("div", { class: "meta" }, bits) : null);
}

function renderConversation() {
  conversationDirty = false;
  const box = $("lines");
  const lines = sortedLines();
  const shown = [...box.querySelectorAll(":scope > .line")].map((n) => n.dataset.key);
  const prefix = shown.every((key, i) => lines[i] && lines[i].key === key);
  if (!prefix) {
    for (const node of box.querySelectorAll(":scope > .line")) node.remove();
  }
  if (prefix) {
    for (const key of staleKeys) {
      const node = box.querySelector(`:scope > .line[data-key="${key}"]`);
      if (node) node.replaceWith(lineNode(model.lines.get(key)));
    }
  }
  staleKeys.clear();
  const stream = $("stream-line");
  for (const line of lines.slice(prefix ? shown.length : 0)) {
    const node = lineNode(line);
    if (stream) box.insertBefore(node, stream);
    else box.append(node);
  }
  view.turnsShown = lines.filter((l) => l.rank === 1).length;
  followConversation();
}

// Keep the newest line in sight unless the viewer has scrolled back to read.
let following = true;
function followConversation() {
  const box = $("lines");
  if (following) box.scrollTop = box.scrollHeight;
}
$("lines").addEventListener("scroll", () => {
  const box = $("lines");
  following = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
});

function renderStream() {
  const box = $("lines");
  let node = $("stream-line");
  const stream = model.stream;
  if (!stream) {
    if (node) node.remove();
    return;
  }
  if (!node) {
    node = h("div", { id: "stream-line", class: "line vendor streaming" },
      h("div", { class: "who" }, h("span", { class: "turn-no" }), "Ramesh"),
      h("div", { class: "bubble" }));
    box.append(node);
  }
  node.dataset.turn = stream.turn;
  node.querySelector(".turn-no").textContent = `T${stream.turn}`;
  node.classList.toggle("withdrawn", Boolean(stream.withdrawn));
  node.querySelector(".bubble").textContent = stream.withdrawn
    ? "Ramesh thinks again…"
    : stream.text;
  followConversation();
}

// --- charts (uPlot)

let happinessPlot = null;
let pricePlot = null;

function xRange(_u, _min, max) {
  const last = Math.max(model.state ? model.state.turn : 0, max || 0);
  return [0, Math.max(5, last + 1)];
}

const xAxis = {
  incrs: [1, 2, 5, 10, 20, 50, 100],
  values: (_u, splits) => splits.map((v) => (Number.isInteger(v) ? v : "")),
  grid: { stroke: "#e5e7eb" },
  font: "14px system-ui, sans-serif",
  size: 34,
};

function drawBands(u) {
  const { ctx, bbox } = u;
  const dpr = devicePixelRatio || 1;
  ctx.save();
  for (const band of MOODS) {
    const top = u.valToPos(band.hi, "y", true);
    const bottom = u.valToPos(band.lo, "y", true);
    ctx.fillStyle = `${band.color}26`; // about 15 % opacity
    ctx.fillRect(bbox.left, top, bbox.width, bottom - top);
    ctx.fillStyle = band.color;
    ctx.font = `700 ${13 * dpr}px system-ui, sans-serif`;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.fillText(band.name, bbox.left + bbox.width + 8 * dpr, (top + bottom) / 2);
  }
  ctx.restore();
}

function drawStageMarks(u) {
  const { ctx, bbox } = u;
  const dpr = devicePixelRatio || 1;
  ctx.save();
  ctx.setLineDash([5 * dpr, 4 * dpr]);
  ctx.lineWidth = 2 * dpr;
  ctx.font = `600 ${11 * dpr}px system-ui, sans-serif`;
  ctx.textBaseline = "top";
  ctx.textAlign = "left";
  for (const change of model.stages) {
    const x = u.valToPos(change.turn, "x", true);
    if (x < bbox.left || x > bbox.left + bbox.width) continue;
    ctx.strokeStyle = stageColor(change.to);
    ctx.beginPath();
    ctx.moveTo(x, bbox.top);
    ctx.lineTo(x, bbox.top + bbox.height);
    ctx.stroke();
    ctx.fillStyle = stageColor(change.to);
    ctx.fillText(change.to, x + 3 * dpr, bbox.top + 2 * dpr);
  }
  ctx.restore();
}

function chartWidth(id) {
  return Math.max(280, $(id).clientWidth);
}

function makeCharts() {
  happinessPlot = new uPlot({
    width: chartWidth("happiness-chart"),
    height: 210,
    padding: [12, 112, 0, 0], // room on the right for the mood names
    legend: { show: false },
    cursor: { drag: { x: false, y: false }, points: { size: 10 } },
    scales: { x: { time: false, range: xRange }, y: { range: [0, 100] } },
    axes: [
      xAxis,
      {
        splits: () => [0, 20, 40, 60, 80, 100],
        grid: { stroke: "#0000" },
        font: "14px system-ui, sans-serif",
        size: 56,
      },
    ],
    series: [
      {},
      {
        label: "happiness",
        stroke: "#111827",
        width: 3,
        points: { show: true, size: 9, fill: "#ffffff", width: 2.5 },
      },
    ],
    hooks: { drawClear: [drawBands], draw: [drawStageMarks] },
  }, [[], []], $("happiness-chart"));

  pricePlot = new uPlot({
    width: chartWidth("price-chart"),
    height: 210,
    padding: [12, 112, 0, 0], // the same plot width as the happiness chart, so turns line up
    legend: { show: false },
    cursor: { drag: { x: false, y: false }, points: { size: 10 } },
    scales: {
      x: { time: false, range: xRange },
      y: { range: (_u, _min, max) => [0, Math.max(50, Math.ceil(((max || 0) * 1.15) / 10) * 10)] },
    },
    axes: [
      xAxis,
      {
        values: (_u, splits) => splits.map((v) => `₹${v}`),
        grid: { stroke: "#e5e7eb" },
        font: "14px system-ui, sans-serif",
        size: 56,
      },
    ],
    series: [
      {},
      {
        label: "quote",
        stroke: "#b45309",
        width: 3,
        spanGaps: true,
        paths: uPlot.paths.stepped({ align: 1 }),
        points: { show: true, size: 9, fill: "#b45309" },
      },
      {
        label: "offer",
        stroke: "#2563eb",
        width: 0,
        paths: () => null,
        points: { show: true, size: 12, fill: "#2563eb", width: 2, stroke: "#ffffff" },
      },
    ],
  }, [[], [], []], $("price-chart"));

  const resize = new ResizeObserver(() => {
    happinessPlot.setSize({ width: chartWidth("happiness-chart"), height: 210 });
    pricePlot.setSize({ width: chartWidth("price-chart"), height: 210 });
  });
  resize.observe($("happiness-chart"));
  resize.observe($("price-chart"));
}

function renderCharts() {
  if (!happinessPlot) makeCharts();
  const turns = [...model.happiness.keys()].sort((a, b) => a - b);
  happinessPlot.setData([turns, turns.map((t) => model.happiness.get(t))]);
  $("happiness-chart").dataset.points = String(turns.length);

  const priceTurns = [...new Set([...model.quotes.keys(), ...model.offers.keys()])]
    .sort((a, b) => a - b);
  pricePlot.setData([
    priceTurns,
    priceTurns.map((t) => (model.quotes.has(t) ? model.quotes.get(t) : null)),
    priceTurns.map((t) => (model.offers.has(t) ? model.offers.get(t) : null)),
  ]);
  const price = $("price-chart");
  price.dataset.quotes = String(model.quotes.size);
  price.dataset.offers = String(model.offers.size);
}

// --- stages, timings, outcome

function renderStages() {
  const list = $("stages");
  const entries = [{ turn: 0, to: "GREETING", forced: false }, ...model.stages];
  const key = entries.map((e) => `${e.turn}${e.to}`).join("|");
  if (list.dataset.key === key) return;
  list.dataset.key = key;
  list.replaceChildren(...entries.map((e, i) => h("li", {
    class: `stage-step${i === entries.length - 1 ? " current" : ""}`,
    dataset: { stage: e.to, turn: e.turn },
  },
  h("span", { class: "chip", style: { background: stageColor(e.to) } }, e.to),
  h("span", { class: "at" }, e.turn === 0 ? "start" : `turn ${e.turn}${e.forced ? " (forced)" : ""}`))));
}

function renderTimings() {
  const box = $("timings");
  const turns = [...model.timings.keys()].sort((a, b) => a - b);
  const key = turns.join(",");
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  const most = Math.max(1, ...turns.map((t) => model.timings.get(t).total_ms || 0));
  const pct = (v) => `${Math.max(0, (100 * (v || 0)) / most)}%`;
  box.replaceChildren(...turns.map((turn) => {
    const t = model.timings.get(turn);
    const queue = t.queue_ms || 0;
    const brain = t.brain_ms || 0;
    const validation = t.validation_ms || 0;
    const total = Math.max(t.total_ms || 0, queue + brain + validation);
    const calls = t.llm_calls === 1 ? "1 LLM call" : `${t.llm_calls} LLM calls`;
    const extra = [t.brain, calls];
    if (t.retries) extra.push(`${t.retries} retries`);
    if (t.first_delta_ms !== null && t.first_delta_ms !== undefined) {
      extra.push(`first words ${ms(t.first_delta_ms)}`);
    }
    return h("div", {
      class: "timing-row",
      dataset: { turn, total: total.toFixed(1), brain: brain.toFixed(1), queue: queue.toFixed(1) },
      title: `queue ${ms(queue)}, brain ${ms(brain)}, rules ${ms(validation)}, total ${ms(total)}`,
    },
    h("span", { class: "turn-no" }, `T${turn}`),
    h("div", { class: "track" },
      h("div", { class: "seg seg-other", style: { left: "0%", width: pct(total) } }),
      h("div", { class: "seg seg-queue", style: { left: "0%", width: pct(queue) } }),
      h("div", { class: "seg seg-brain", style: { left: pct(queue), width: pct(brain) } }),
      h("div", {
        class: "seg seg-validation",
        style: { left: pct(queue + brain), width: pct(validation) },
      }),
      t.first_delta_ms !== null && t.first_delta_ms !== undefined
        ? h("div", { class: "tick", style: { left: pct(queue + t.first_delta_ms) } })
        : null),
    h("span", { class: "total" }, ms(total)),
    h("span", { class: "detail" }, extra.join(" · ")));
  }));
}

function renderOutcome() {
  const box = $("outcome");
  const s = model.summary;
  if (!s) {
    box.hidden = true;
    return;
  }
  const key = JSON.stringify(s);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.hidden = false;
  box.dataset.outcome = s.outcome;
  const mood = moodFor(s.final_happiness);
  const headline = s.outcome === "deal" && s.final_price !== null
    ? `${OUTCOME_TITLES.deal} ${s.item || ""} at ${rupees(s.final_price)}`
    : OUTCOME_TITLES[s.outcome] || s.outcome;
  const facts = [
    ["First quote", rupees(s.first_quote)],
    ["Final price", rupees(s.final_price)],
    ["Discount", s.discount_pct === null ? "–" : `${s.discount_pct}%`],
    ["Turns", s.turns],
    ["Final happiness", `${s.final_happiness} (${mood.name})`],
    ["Insults", s.insults],
  ];
  box.replaceChildren(
    h("h2", { class: "headline" }, headline),
    h("dl", { class: "summary" }, facts.map(([k, v]) => h("div", {}, h("dt", {}, k),
      h("dd", { dataset: { field: k.toLowerCase().replace(/ /g, "_") } }, v)))),
    h("p", { class: "path" }, (s.stages || []).join(" → ")),
  );
}

if (!sessionId || !token) {
  setStatus("failed", "no session");
  showFatal("This page needs ?session=ID&token=SPECTATOR_TOKEN. Get a link from the lobby.");
} else {
  connect();
}
