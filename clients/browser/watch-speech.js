// The learner's spoken turns (docs/voice.md): each `speech` event is shown in the Voice panel as a
// level meter (one bar per 50 ms of the utterance, from the event's `levels`), the words the
// recogniser heard, its confidence and the backend. An unclear one (confidence under 0.7, the
// server's default threshold) is marked, as is a recognition that failed (`fallback`). Newest first,
// the last 8 kept. `speech` is in the sequenced stream, so a resume replays it. An open microphone's
// turn in progress shows its `speech.partial` text ("hearing…") until its `speech` ends the turn;
// that turn's card then carries an end-of-turn marker: how many partials came and how long after the
// last one the server ended the turn (measured here, on arrival: the `speech` event does not say the
// wait that ended it).

import { h } from "./common.js";

const KEEP = 8;
const CLARIFY_BELOW = 0.7;
const spoken = [];

function meter(levels) {
  const width = Math.max(1, levels.length) * 3;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "level-meter");
  svg.setAttribute("viewBox", `0 0 ${width} 24`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "loudness of the learner's utterance");
  levels.forEach((level, i) => {
    const bar = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    const height = Math.max(1, Math.round(level * 24));
    bar.setAttribute("x", String(i * 3));
    bar.setAttribute("y", String(24 - height));
    bar.setAttribute("width", "2");
    bar.setAttribute("height", String(height));
    svg.append(bar);
  });
  return svg;
}

function card(s) {
  const unclear = s.fallback || (s.confidence !== null && s.confidence < CLARIFY_BELOW);
  const confidence = s.confidence === null ? "no confidence given" : `${Math.round(s.confidence * 100)}% sure`;
  return h("div", { class: `speech${unclear ? " unclear" : ""}`,
                    dataset: { id: s.id, confidence: s.confidence ?? "", levels: s.levels.length } },
    meter(s.levels),
    h("p", { class: "speech-text", text: s.fallback ? "(not recognised)" : `“${s.text}”` }),
    h("p", { class: "speech-meta" },
      h("span", { class: "confidence", text: confidence }),
      ` · ${(s.duration_ms / 1000).toFixed(1)} s · ${s.stt}`,
      unclear ? h("span", { class: "tag unclear", text: s.fallback ? "recognition failed" : "unclear: asked again" }) : null),
    s.ended === null ? null : h("p", { class: "turn-end", dataset: { partials: s.ended.partials, waitMs: s.ended.waitMs },
      text: `⏹ turn ended · ${s.ended.partials} partial${s.ended.partials === 1 ? "" : "s"} · `
            + `${(s.ended.waitMs / 1000).toFixed(1)} s after the last`}));
}

function render() {
  const panel = document.getElementById("voice-panel");
  const box = document.getElementById("speech");
  if (!panel || !box) return;
  panel.hidden = false;
  const partial = hearing === null ? [] : [h("div", { class: "speech partial", dataset: { id: hearing.id } },
    h("p", { class: "speech-text", text: `hearing… “${hearing.text}”` }))];
  box.replaceChildren(...partial, ...spoken.map(card));
}

let hearing = null; // the open microphone's turn in progress: { id, text, partials, at }

export function showPartial(message) {
  const partials = hearing !== null && hearing.id === message.id ? hearing.partials + 1 : 1;
  hearing = { id: message.id, text: message.text, partials, at: performance.now() };
  render();
}

export function showSpeech(message) {
  let ended = null;
  if (hearing !== null && hearing.id === message.id) { // the turn's end: its final words
    ended = { partials: hearing.partials, waitMs: Math.round(performance.now() - hearing.at) };
    hearing = null;
  }
  spoken.unshift({ ended, id: message.id, text: message.text, confidence: message.confidence ?? null,
                   levels: message.levels || [], duration_ms: message.duration_ms || 0,
                   stt: message.stt || "?", fallback: Boolean(message.fallback) });
  spoken.length = Math.min(spoken.length, KEEP);
  render();
}
