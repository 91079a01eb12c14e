// The lobby: every live session on this server, kept current over /ws/lobby.
//
// The socket sends `lobby` (the whole list) on connect and every 30 s, and `lobby.update`
// (changed rows and removed ids) as sessions change, at most four times a second. When the server
// has an admin key the teacher signs in once (/view/signin.html); the browser sends the HttpOnly
// sign-in cookie with the socket's handshake, so no key is ever in a URL.

import { Backoff, ago, currencySymbolOf, h, moodColor, stageColor, wsUrl } from "./common.js";

const sessions = new Map(); // session_id -> row
let clockOffset = 0; // server time minus this browser's time, in seconds
let ws = null;
const backoff = new Backoff();

const lobby = {
  connected: false,
  messages: 0,
  updates: 0,
  rows: () => [...sessions.values()],
};
window.samvadLobby = lobby;

const $ = (id) => document.getElementById(id);

function setStatus(state, text) {
  const node = $("status");
  node.dataset.state = state;
  node.textContent = text;
}

function connect() {
  const sock = new WebSocket(wsUrl("/ws/lobby"));
  ws = sock;
  sock.onopen = () => {
    lobby.connected = true;
    backoff.reset();
    setStatus("live", "live");
  };
  sock.onmessage = (event) => {
    if (sock !== ws) return;
    const message = JSON.parse(event.data);
    lobby.messages += 1;
    clockOffset = message.server_time - Date.now() / 1000;
    const changed = new Set();
    if (message.type === "lobby") {
      sessions.clear();
      for (const row of message.sessions) sessions.set(row.session_id, row);
    } else if (message.type === "lobby.update") {
      lobby.updates += 1;
      for (const row of message.sessions) {
        sessions.set(row.session_id, row);
        changed.add(row.session_id);
      }
      for (const sid of message.removed || []) sessions.delete(sid);
    }
    render(changed, message.type === "lobby");
  };
  sock.onclose = (event) => {
    if (sock !== ws) return;
    lobby.connected = false;
    if (event.code === 4401) {
      setStatus("failed", "admin key needed");
      const fatal = $("fatal");
      fatal.textContent = "This server needs its admin key: sign in first";
      fatal.hidden = false;
      location.replace("/view/signin.html?next=/view/lobby.html");
      return;
    }
    setStatus("reconnecting", "reconnecting…");
    setTimeout(connect, backoff.take());
  };
}

function lastTurnText(row) {
  const now = Date.now() / 1000 + clockOffset;
  if (row.last_turn_at === null || row.last_turn_at === undefined) {
    return `no turns yet · started ${ago(now - row.created_at)}`;
  }
  return ago(now - row.last_turn_at);
}

function price(row, value) {
  return `${currencySymbolOf(row.currency)}${value}`;
}

function rowNode(row) {
  const tr = h("tr", {
    class: row.is_terminal ? "ended" : null,
    dataset: { sessionId: row.session_id, stage: row.stage, turn: row.turn },
  },
  h("td", {},
    h("span", { class: "learner-name" }, row.learner_id || "anonymous"),
    h("span", { class: "small" }, `${row.scenario} · ${row.session_id.slice(0, 8)}`)),
  h("td", {},
    row.item || "–",
    h("span", { class: "small" }, row.vendor_quote === null ? "" : `quote ${price(row, row.vendor_quote)}`
      + (row.last_offer === null ? "" : ` · offer ${price(row, row.last_offer)}`))),
  h("td", {},
    h("span", { class: "chip", style: { background: stageColor(row.stage) } }, row.stage),
    row.outcome ? h("span", { class: "small" }, row.outcome.replace("_", " ")) : null),
  h("td", { class: "num" },
    h("span", { class: "chip", style: { background: moodColor(row.vendor_mood) } },
      `${row.vendor_mood} ${row.happiness_score}`)),
  h("td", { class: "num" }, `${row.turn} / ${row.max_turns}`,
    row.thinking ? h("span", { class: "small" }, `${row.vendor || "the vendor"} is answering…`) : null),
  h("td", { class: "num ago", dataset: { sessionId: row.session_id } }, lastTurnText(row)),
  h("td", {},
    h("span", { class: `presence${row.player_connected ? " on" : ""}` },
      row.player_connected ? "learner" : "learner away"),
    h("span", { class: "small" }, `${row.spectators} watching`)),
  h("td", {}, h("a", {
    class: "watch-link", href: row.watch_url, target: "_blank", rel: "noopener",
  }, "Watch →")));
  return tr;
}

function render(changed, full) {
  const body = $("sessions").querySelector("tbody");
  const rows = [...sessions.values()].sort((a, b) => b.created_at - a.created_at);
  const existing = new Map(
    [...body.children].map((tr) => [tr.dataset.sessionId, tr]),
  );
  const ordered = rows.map((row) => {
    const old = existing.get(row.session_id);
    if (old && !full && !changed.has(row.session_id)) return old;
    const node = rowNode(row);
    if (changed.has(row.session_id)) {
      node.classList.add("flash");
      setTimeout(() => node.classList.remove("flash"), 50);
    }
    return node;
  });
  body.replaceChildren(...ordered);
  $("empty").hidden = rows.length > 0;
  $("count").textContent = String(rows.length);
  $("haggling").textContent = String(rows.filter((r) => r.stage === "HAGGLING").length);
  $("deals").textContent = String(rows.filter((r) => r.outcome === "deal").length);
}

setInterval(() => {
  for (const cell of document.querySelectorAll("td.ago")) {
    const row = sessions.get(cell.dataset.sessionId);
    if (row) cell.textContent = lastTurnText(row);
  }
}, 1000);

connect();
