// The watch page's state: the session as the page knows it (`model`), the counters the tests read
// (`view`, published as window.samvadView by watch.js), and the pure updates that fold the session
// stream into the model. No DOM and no socket here: watch-socket.js decides what to apply and
// watch-render.js draws the result.

// Order of the lines of one turn: learner, vendor; lines after the end come last, by seq.
const RANK = { learner: 0, vendor: 1, "late-learner": 2, "late-vendor": 3 };

export const model = {
  state: null, // the scalar facts of SessionState, kept current by the events
  lines: new Map(), // key -> {key, turn, role, rank, seq, text, meta}
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
  lines: () => sortedLines().map(({ turn, role, text }) => ({ turn, role, text })),
};

// What the conversation panel has to redraw: set by the updates here, cleared by watch-render.js.
export const conversation = {
  dirty: true,
  staleKeys: new Set(), // lines shown already whose text or tags changed
};

export function sortedLines() {
  return [...model.lines.values()].sort(
    (a, b) => a.turn - b.turn || a.rank - b.rank || a.seq - b.seq,
  );
}

export function rebuild(state) {
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
  conversation.dirty = true;
}

function addLine(line) {
  const key = line.rank >= 2 ? `${line.rank}:${line.seq}` : `${line.turn}:${line.role}`;
  const existing = model.lines.get(key);
  if (existing) conversation.staleKeys.add(key);
  model.lines.set(key, { ...existing, ...line, key });
}

export function apply(event) {
  const state = model.state;
  switch (event.type) {
    case "reply": {
      // A reply to a transcript sent after the end, or one that is not a turn (`mark: clarify`):
      // shown after the turn's own lines, and it moves no chart.
      const late = state.is_terminal || Boolean(event.mark);
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
      conversation.dirty = true;
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
