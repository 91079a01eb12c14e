// The watch page's state: the session as the page knows it (`model`), the counters the tests read
// (`view`, published as window.samvadView by watch.js), and the pure updates that fold the session
// stream into the model, coaching events included (hints, undos, barge-ins, repeats). No DOM and
// no socket here: watch-socket.js decides what to apply and watch-render.js draws the result.

// The conversation is a set of entries drawn in order of `pos`, the seq of the event that made
// them, then `n`, the order this page made them in:
//   lines  {kind: "line", role: "learner" | "vendor", turn, text, meta, late, undone, heard}.
//          A turn's own lines are keyed `${turn}:${role}`. A reply that is not a turn (its `mark`)
//          or that came after the end is `late`, keyed by its seq. An undo re-keys the lines it
//          takes back `undone:...` and keeps them (struck through), so the turn played again gets
//          lines of its own.
//   notes  {kind: "note", note: "hint" | "undo" | "heard" | "repeat", event}, keyed `note:${seq}`:
//          what happened between the lines.
// Lines rebuilt from a state's transcript have no seq: each keeps the place of the line already
// shown with the same key and text, else it goes after everything the page had seen.

export const model = {
  state: null, // the scalar facts of SessionState, kept current by the events
  entries: new Map(), // key -> line or note, above
  happiness: new Map(), // turn -> score
  quotes: new Map(), // turn -> rupees
  offers: new Map(), // turn -> rupees
  stages: [], // {turn, from, to, forced}
  timings: new Map(), // turn -> timings (never in snapshots, so kept across them)
  summary: null,
  stream: null, // {turn, text, withdrawn}
  tips: null, // the latest `tips` event: {turn, cards}
  report: null, // the `session.report` event's report, once the session has ended
  vendor: { name: "Ramesh", place: "Johari Bazaar, Jaipur", stall: "stall" }, // from the scenario pack
  earned: new Map(), // card_id -> card: every grounded card this page has seen
};

const isTurnLine = (e) => e.kind === "line" && !e.late && !e.undone;

export const view = {
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
  dropSocket: null, // the socket's test hook, set by watch.js
  points: () => ({
    happiness: model.happiness.size,
    quotes: model.quotes.size,
    offers: model.offers.size,
    stages: model.stages.length,
    timings: model.timings.size,
  }),
  tips: () => (model.tips ? { turn: model.tips.turn, cards: model.tips.cards.length } : null),
  report: () => (model.report ? { score: model.report.score, suggestions: model.report.suggestions.length } : null),
  lines: () => sortedEntries().filter(isTurnLine).map(({ turn, role, text }) => ({ turn, role, text })),
  notes: () => sortedEntries().filter((e) => e.kind === "note").map((e) => ({ note: e.note, seq: e.pos })),
};

// What the conversation panel has to redraw: set by the updates here, cleared by watch-render.js.
export const conversation = {
  dirty: true,
  staleKeys: new Set(), // entries shown already whose text or tags changed
};

let made = 0; // entries made so far: the `n` that orders entries of one event

export function sortedEntries() {
  return [...model.entries.values()].sort((a, b) => a.pos - b.pos || a.n - b.n);
}

// The vendor's turn lines on show (taken-back and late ones left out).
export function turnsOnShow() {
  return [...model.entries.values()].filter((e) => isTurnLine(e) && e.role === "vendor").length;
}

function put(key, fields) {
  const existing = model.entries.get(key);
  if (existing) conversation.staleKeys.add(key);
  model.entries.set(key, existing ? { ...existing, ...fields, key } : { ...fields, key, n: ++made });
  conversation.dirty = true;
}

function addNote(event, note) {
  put(`note:${event.seq}`, { kind: "note", note, pos: event.seq, turn: event.turn, event });
}

const ROLE_ORDER = { learner: 0, vendor: 1 };
const earlier = (a, b) => a.turn < b.turn || (a.turn === b.turn && ROLE_ORDER[a.role] < ROLE_ORDER[b.role]);

// Takes a whole state: from `welcome`, a `snapshot`, or a restart that lost events. `seen` is the
// seq this page had applied before. What it showed and the state still holds stays as it was
// (tags, flags, notes, lines taken back); anything of a seq past the state's is dropped.
export function rebuild(state, seen = 0) {
  const old = model.entries;
  const transcript = state.transcript || [];
  model.entries = new Map();
  for (const entry of old.values()) {
    if (entry.pos > state.seq) continue;
    // Turn lines come back from the transcript, except those older than its window.
    if (isTurnLine(entry) && !(transcript.length && earlier(entry, transcript[0]))) continue;
    model.entries.set(entry.key, entry);
  }
  const after = Math.min(seen, state.seq) + 0.5; // where lines this page never saw go
  let prev = 0;
  for (const line of transcript) {
    const key = `${line.turn}:${line.role}`;
    const known = old.get(key);
    const same = known && isTurnLine(known) && known.text === line.text;
    const pos = Math.max(prev, same ? known.pos : after);
    model.entries.set(key, same
      ? { ...known, pos }
      : { kind: "line", key, n: ++made, pos, turn: line.turn, role: line.role, text: line.text, meta: {} });
    prev = pos;
  }
  conversation.staleKeys.clear();
  conversation.dirty = true;
  adopt(state);
}

// The state's facts and charts, replacing the page's (the conversation is the caller's).
function adopt(state) {
  model.state = { ...state };
  delete model.state.transcript;
  model.happiness = new Map((state.happiness_history || []).map((p) => [p.turn, p.value]));
  model.quotes = new Map((state.quotes || []).map((p) => [p.turn, p.value]));
  model.offers = new Map((state.offers || []).map((p) => [p.turn, p.value]));
  model.stages = (state.stage_changes || []).map((c) => ({
    turn: c.turn, from: c.from_stage, to: c.to_stage, forced: false,
  }));
  for (const turn of model.timings.keys()) {
    if (turn > state.turn) model.timings.delete(turn); // taken back, or lost with the server
  }
  model.summary = state.summary || null;
  if (model.stream && model.stream.turn <= state.turn) model.stream = null;
}

// `undo`: the session is as it was before turn `event.turn`. The lines of that turn (and of any
// later one) stay on show, struck through, under new keys, with a note that says so.
function undo(event) {
  for (const entry of [...model.entries.values()]) {
    if (isTurnLine(entry) && entry.turn > event.state.turn) {
      const key = `undone:${event.seq}:${entry.turn}:${entry.role}`;
      model.entries.delete(entry.key);
      model.entries.set(key, { ...entry, key, undone: event.turn });
    }
  }
  addNote(event, "undo");
  adopt(event.state);
}

// `heard`: the learner cut in, so only `heard_text` of the vendor's line was heard; a price said
// in the unheard part did not bind, and `vendor_quote` is the quote that stands.
function heard(event) {
  const line = model.entries.get(`${event.turn}:vendor`);
  if (line) {
    put(line.key, {
      heard: event.interrupted ? event.heard_text : null, unbound: Boolean(line.unbound || event.quote_unbound),
    });
  }
  if (event.interrupted || event.quote_unbound) addNote(event, "heard");
  if (event.quote_unbound) model.state.vendor_quote = event.vendor_quote;
}

export function apply(event) {
  const state = model.state;
  switch (event.type) {
    case "reply": {
      // A reply to a transcript sent after the end, or one that is not a turn (`mark`: clarify,
      // nudge, welcome_back): shown in order after the turn's own lines, and it moves no chart.
      const late = state.is_terminal || Boolean(event.mark);
      const at = (role) => (late ? `late:${event.seq}:${role}` : `${event.turn}:${role}`);
      if (event.learner_text) {
        put(at("learner"), {
          kind: "line", role: "learner", turn: event.turn, late, pos: event.seq, text: event.learner_text,
          meta: { offer: event.learner_offer, assessment: event.offer_assessment, readFrom: event.offer_read_from || "" },
        });
      }
      put(at("vendor"), {
        kind: "line", role: "vendor", turn: event.turn, late, pos: event.seq, text: event.text,
        heard: null, unbound: false,
        meta: {
          mood: event.vendor_mood, happiness: event.happiness_score, stage: event.negotiation_state,
          quote: event.counter_price, fallback: event.fallback, flags: event.flags || [], mark: event.mark,
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
    case "tips":
      model.tips = { turn: event.turn, cards: event.cards || [] };
      for (const card of model.tips.cards) {
        if (card.grounded) model.earned.set(card.card_id, card);
      }
      return;
    case "hint":
    case "repeat":
      addNote(event, event.type);
      return;
    case "undo":
      undo(event);
      return;
    case "heard":
      heard(event);
      return;
    case "session.report":
      model.report = event.report;
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

// A `reply.delta`: Ramesh's words so far. True when the stream line needs drawing again.
export function streamDelta(message) {
  view.deltas += 1;
  const state = model.state;
  if (!state || message.turn <= state.turn) return false; // that turn is answered already
  if (!model.stream || model.stream.turn !== message.turn) {
    model.stream = { turn: message.turn, text: "", withdrawn: null };
  }
  model.stream.text += message.text;
  model.stream.withdrawn = null;
  return true;
}

// A `reply.withdrawn`: the streamed words are taken back. True when the stream line changed.
export function streamWithdrawn(message) {
  view.withdrawals += 1;
  if (model.stream && model.stream.turn === message.turn) {
    model.stream.text = "";
    model.stream.withdrawn = message.reason || "withdrawn";
    return true;
  }
  return false;
}
