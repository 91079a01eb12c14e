// The watch page's coaching, drawn: the notes between the lines (hints, turns taken back, barge-ins,
// repeats), the tags of replies that are not turns, a reply's flags in plain words, and the
// report's level, coaching counts and clamps. Every text here is data (the learner's words, the
// brain's, the pack's), so it only ever reaches the page as text nodes, through h().

import { h, rupees } from "./common.js";
import { explain } from "./flags.js";
import { model } from "./watch-state.js";

// A reply that is not a turn, by its `mark` (docs/protocol.md section 4).
export const MARK_TAGS = {
  clarify: "asked to hear it again",
  nudge: "nudge: the learner was silent",
  welcome_back: "welcome back: a recap",
};

// A hint's `kind`, in the words a teacher would use.
const HINT_KINDS = {
  contextual: "what is going on",
  structural: "a sentence frame",
  reveal: "a line to say",
};

export function markTag(mark) {
  return h("span", { class: `tag mark mark-${mark}`, dataset: { mark } }, MARK_TAGS[mark] || mark);
}

// What the server changed in the vendor's proposal, one plain sentence a flag (its name on hover).
export function flagList(flags) {
  if (!flags || !flags.length) return null;
  return h("ul", { class: "flags" },
    flags.map((flag) => h("li", { dataset: { flag }, title: flag }, explain(flag))));
}

// The vendor's words as the learner heard them: after a barge-in the unheard rest is greyed.
export function heardText(text, heard) {
  if (heard === null || heard === undefined || !text.startsWith(heard)) return [text];
  return [
    h("span", { class: "heard" }, heard),
    h("span", { class: "unheard", title: "not heard: the learner cut in" }, text.slice(heard.length)),
  ];
}

const learner = () => (model.state && model.state.learner_id) || "The learner";

const NOTES = {
  hint: (e) => ({
    data: { level: e.level, kind: e.kind, offered: String(Boolean(e.offered)) },
    body: [
      h("div", { class: "note-head" },
        `Hint for turn ${e.turn} · level ${e.level} · ${HINT_KINDS[e.kind] || e.kind}`,
        e.offered ? h("span", { class: "tag offered" }, "offered") : null),
      h("p", { class: "hint-text" }, e.text),
      e.english ? h("p", { class: "hint-english" }, e.english) : null,
    ],
  }),
  undo: (e) => ({
    data: {},
    body: [
      h("div", { class: "note-head" }, `Turn ${e.turn} taken back`),
      h("p", {}, "Its lines stay above, struck through; the session is as it was before it."),
    ],
  }),
  heard: (e) => ({
    data: { unbound: String(Boolean(e.quote_unbound)) },
    body: [
      h("div", { class: "note-head" }, e.interrupted
        ? `${learner()} cut in on turn ${e.turn}'s reply`
        : `Turn ${e.turn}'s reply was heard to the end`),
      e.interrupted
        ? h("p", {}, e.heard_text
          ? `Only the first ${e.heard_chars} characters were heard; the rest is greyed.`
          : "Not a word of it was heard.")
        : null,
      e.quote_unbound
        ? h("p", { class: "unbound" }, "The price in the unheard part did not bind: ",
          e.vendor_quote === null || e.vendor_quote === undefined
            ? "no quote stands yet."
            : `the quote that stands is ${rupees(e.vendor_quote)}.`)
        : null,
    ],
  }),
  repeat: (e) => ({
    data: {},
    body: [
      h("div", { class: "note-head" }, `Asked to repeat: ${model.vendor.name} said his last line again`),
      h("p", { class: "hint-text" }, e.text),
    ],
  }),
};

export function noteNode(entry) {
  const e = entry.event;
  const { data, body } = NOTES[entry.note](e);
  return h("div", {
    class: `note note-${entry.note}`,
    dataset: { key: entry.key, note: entry.note, turn: e.turn, ...data },
  }, body);
}

// --- the report: the learner's level, what was asked for, where the rules stepped in

const COUNTS = [
  ["hints_0", "hints: what is going on", (c) => c.hints[0]],
  ["hints_1", "hints: sentence frames", (c) => c.hints[1]],
  ["hints_2", "hints: lines revealed", (c) => c.hints[2]],
  ["hints_offered", "hints offered unasked", (c) => c.hints_offered],
  ["repeats", "repeats", (c) => c.repeats],
  ["undos", "turns taken back", (c) => c.undos],
  ["timeouts", "silences", (c) => c.timeouts],
  ["unclear", "unclear lines asked again", (c) => c.unclear],
];

export function reportCoaching(report) {
  const counts = report.coaching;
  const clamps = report.clamps || [];
  return [
    h("p", { class: "report-level", dataset: { level: report.level || "" } },
      `Level: ${report.level || "intermediate"}`),
    counts
      ? h("dl", { class: "coaching-counts" }, COUNTS.map(([field, label, value]) => h("div", {
        dataset: { field },
      }, h("dt", {}, label), h("dd", {}, String(value(counts))))))
      : null,
    report.estimate
      ? h("p", { class: "report-estimate", dataset: { band: report.estimate.band } },
        `Estimated level: ${report.estimate.band} (${report.estimate.level}), `
        + `${Math.round(100 * report.estimate.confidence)}% sure`)
      : null,
    report.fluency
      ? h("p", { class: "report-fluency", dataset: { wpm: report.fluency.words_per_minute } },
        `Speaking (${report.fluency.turns} spoken turns): ${report.fluency.words_per_minute} words a minute · `
        + `${Math.round(100 * report.fluency.pause_ratio)}% in pauses · `
        + `${report.fluency.mean_length_of_run} words between pauses · ${report.fluency.fillers} fillers`)
      : null,
    h("h3", {}, "Where the rules stepped in"),
    clamps.length
      ? h("ul", { class: "clamps" }, clamps.map((c) => h("li", { dataset: { flag: c.flag, turn: c.turn } },
        h("span", { class: "turn-no" }, `T${c.turn}`), c.explanation || explain(c.flag))))
      : h("p", { class: "small" }, "Nowhere: every reply was the vendor's own."),
  ];
}
