// The learner's spoken turns (docs/voice.md): each `speech` event is shown in the Voice panel as a
// level meter (one bar per 50 ms of the utterance, from the event's `levels`), the words the
// recogniser heard, its confidence and the backend. An unclear one (confidence under 0.7, the
// server's default threshold) is marked, as is a recognition that failed (`fallback`). Newest first,
// the last 8 kept. `speech` is in the sequenced stream, so a resume replays it. An open microphone's
// turn in progress shows its `speech.partial` text ("hearing…") until its `speech` ends the turn;
// that turn's card then carries an end-of-turn marker: how many partials came and the silence the
// server waited before ending the turn (the `speech` event's `end_of_turn_ms`).
//
// Each spoken turn's card also shows its voice pipeline (docs/voice.md, "Per-stage timings"), all
// from the server's own figures: the end-of-turn wait and STT (the `speech`), the brain's first words
// (the reply's `timings`), the speech service's first byte and the first audio the player got
// (`reply.spoken`). A waterfall from the learner's last word: each stage starts where the one before
// it ended, and "first audio" is the measured total from the end of the turn.

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
    s.eot === null ? null : h("p", { class: "turn-end", dataset: { partials: s.partials, waitMs: s.eot },
      text: `⏹ turn ended · ${s.partials} partial${s.partials === 1 ? "" : "s"} · `
            + `after ${(s.eot / 1000).toFixed(2)} s of silence`}),
    pipeline(s));
}

const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;

// The voice pipeline of one spoken turn: a row per stage the server has measured, each a bar placed
// on one scale from the learner's last word (the turn's end when the client ended it).
function pipeline(s) {
  const eot = s.eot ?? 0;
  const rows = [];
  let at = 0;
  for (const [stage, label, ms] of [["end_of_turn", "end of turn", s.eot], ["stt", "STT", s.sttMs],
                                    ["brain", "brain first words", s.brainMs], ["tts", "TTS first byte", s.ttsMs]]) {
    if (ms === null) continue;
    rows.push({ stage, label, ms, from: at });
    at += ms;
  }
  if (s.firstAudioMs !== null) rows.push({ stage: "first_audio", label: "first audio", ms: s.firstAudioMs, from: eot });
  if (rows.length === 0) return null;
  const scale = Math.max(...rows.map((r) => r.from + r.ms), 1);
  const pct = (ms) => `${(100 * ms / scale).toFixed(1)}%`;
  return h("ol", { class: "pipeline", "aria-label": "voice pipeline, from the learner's last word" },
    rows.map((r) => h("li", { dataset: { stage: r.stage, ms: r.ms },
                              title: r.stage === "first_audio" ? `${seconds(r.ms)} after the turn ended` : null },
      h("span", { class: "stage-name", text: r.label }),
      h("span", { class: "stage-track" },
        h("span", { class: `stage-bar ${r.stage}`, style: { marginLeft: pct(r.from), width: pct(r.ms) } })),
      h("span", { class: "stage-ms", text: r.stage === "first_audio" ? `${seconds(eot + r.ms)}` : seconds(r.ms) }))));
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

let hearing = null; // the open microphone's turn in progress: { id, text, partials }
const early = new Map(); // `reply.spoken` figures that came before their turn's `speech` (by utterance id)

export function showPartial(message) {
  const partials = hearing !== null && hearing.id === message.id ? hearing.partials + 1 : 1;
  hearing = { id: message.id, text: message.text, partials };
  render();
}

export function showSpeech(message) {
  let partials = 0;
  if (hearing !== null && hearing.id === message.id) { // the turn's end: its final words
    partials = hearing.partials;
    hearing = null;
  }
  const figures = early.get(message.id);
  early.delete(message.id);
  spoken.unshift({ id: message.id, text: message.text, confidence: message.confidence ?? null,
                   levels: message.levels || [], duration_ms: message.duration_ms || 0,
                   stt: message.stt || "?", fallback: Boolean(message.fallback), partials,
                   eot: message.end_of_turn_ms ?? null, sttMs: message.stt_ms ?? null, brainMs: null,
                   ttsMs: figures?.tts_first_byte_ms ?? null, firstAudioMs: figures?.first_audio_ms ?? null });
  spoken.length = Math.min(spoken.length, KEEP);
  render();
}

// A reply to a spoken turn: the brain's first words (its first streamed words, else the whole reply),
// as `/metrics` counts them.
export function showReplyTimings(reply) {
  const s = spoken.find((x) => x.id === reply.in_reply_to);
  const t = reply.timings;
  if (!s || !t) return;
  s.brainMs = t.first_delta_ms ?? t.total_ms;
  if (s.sttMs === null) s.sttMs = t.stt_ms ?? null;
  render();
}

// The player's first audio of the reply to a spoken turn (`reply.spoken`, outside the sequence).
export function showSpoken(message) {
  const t = message.timings;
  const s = spoken.find((x) => x.id === t.in_reply_to);
  if (!s) {
    early.set(t.in_reply_to, t);
    if (early.size > KEEP) early.delete(early.keys().next().value);
    return;
  }
  s.ttsMs = t.tts_first_byte_ms;
  s.firstAudioMs = t.first_audio_ms;
  render();
}
