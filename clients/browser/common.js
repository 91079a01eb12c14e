// Shared pieces of the spectator pages: vocabulary, colours, formatting and a DOM helper.

export const MOODS = [
  { name: "angry", lo: 0, hi: 20, color: "#dc2626" },
  { name: "annoyed", lo: 20, hi: 40, color: "#ea580c" },
  { name: "neutral", lo: 40, hi: 60, color: "#64748b" },
  { name: "friendly", lo: 60, hi: 80, color: "#16a34a" },
  { name: "enthusiastic", lo: 80, hi: 100, color: "#9333ea" },
];

export const STAGE_COLORS = {
  GREETING: "#0284c7",
  INQUIRY: "#4f46e5",
  HAGGLING: "#d97706",
  DEAL: "#16a34a",
  WALKAWAY: "#dc2626",
  CLOSURE: "#475569",
};

export const OUTCOME_TITLES = {
  deal: "Deal!",
  walked_away: "Walked away",
  no_deal: "No deal",
  turn_limit: "Out of time",
  stopped: "Stopped",
};

// The same bands as session/rules.py MOOD_BANDS: 0-20 angry, 21-40 annoyed, and so on.
export function moodFor(score) {
  if (score <= 20) return MOODS[0];
  if (score <= 40) return MOODS[1];
  if (score <= 60) return MOODS[2];
  if (score <= 80) return MOODS[3];
  return MOODS[4];
}

export function moodColor(name) {
  const mood = MOODS.find((m) => m.name === name);
  return mood ? mood.color : "#64748b";
}

export function stageColor(stage) {
  return STAGE_COLORS[stage] || "#475569";
}

// Prices in the session's currency; the watch page sets it from its scenario pack.
const SYMBOLS = { INR: "₹", JPY: "¥", MAD: "MAD " };
export function currencySymbolOf(code) {
  return SYMBOLS[code] ?? (code ? `${code} ` : "₹");
}
let currencySymbol = "₹";
export function setCurrency(code) {
  currencySymbol = currencySymbolOf(code);
}
export function rupees(value) {
  return value === null || value === undefined ? "–" : `${currencySymbol}${value}`;
}

export function ms(value) {
  if (value === null || value === undefined) return "–";
  if (value >= 1000) return `${(value / 1000).toFixed(value >= 10000 ? 0 : 1)} s`;
  if (value >= 10) return `${Math.round(value)} ms`;
  return `${value.toFixed(1)} ms`;
}

export function ago(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "–";
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s ago`;
  const h = Math.floor(m / 60);
  return `${h} h ${m % 60} min ago`;
}

// h("div", {class: "x", dataset: {turn: 3}}, "text", child) -> element
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "style" && typeof value === "object") Object.assign(node.style, value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function wsUrl(path) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}`;
}

// Reconnect delays: 0.3 s doubling to 5 s, with a little jitter so a room of screens spreads out.
export class Backoff {
  constructor(first = 300, most = 5000) {
    this.first = first;
    this.most = most;
    this.next = first;
  }
  take() {
    const wait = this.next * (0.85 + Math.random() * 0.3);
    this.next = Math.min(this.next * 2, this.most);
    return wait;
  }
  reset() {
    this.next = this.first;
  }
}
