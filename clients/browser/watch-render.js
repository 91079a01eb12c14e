// The watch page's drawing: the header facts, the conversation (with the line the vendor is still
// streaming), the stage list, the pipeline timings, the outcome and the report, all from
// watch-state.js. The charts live in watch-charts.js; the coaching notes, the flags in plain words
// and the report's coaching part in watch-coaching.js.

import { OUTCOME_TITLES, h, moodColor, moodFor, ms, rupees, stageColor } from "./common.js";
import { renderCharts } from "./watch-charts.js";
import { flagList, heardText, markTag, noteNode, reportCoaching } from "./watch-coaching.js";
import { conversation, model, sortedEntries, turnsOnShow, view } from "./watch-state.js";

const $ = (id) => document.getElementById(id);

export function setStatus(state, text) {
  view.status = state;
  const node = $("status");
  node.dataset.state = state;
  node.textContent = text;
}

export function showFatal(text) {
  const node = $("fatal");
  node.textContent = text;
  node.hidden = false;
}

export function render() {
  if (!model.state) return;
  renderHeader();
  if (conversation.dirty) renderConversation();
  renderStream();
  renderCharts();
  renderStages();
  renderTimings();
  renderOutcome();
  renderTips();
  renderReport();
}

function renderHeader() {
  const s = model.state;
  for (const node of document.querySelectorAll(".vendor-name")) node.textContent = model.vendor.name;
  $("vendor-place").textContent = model.vendor.place;
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
  if (line.role === "vendor" && meta.mark) bits.push(markTag(meta.mark));
  if (line.role === "vendor" && !line.late) {
    bits.push(h("span", { class: "tag", style: { background: moodColor(meta.mood) } },
      `${meta.mood} ${meta.happiness}`));
    if (meta.quote !== null && meta.quote !== undefined) {
      bits.push(line.unbound
        ? h("span", { class: "tag quote unbound", title: "said in the part the learner did not hear" },
          `quote ${rupees(meta.quote)} did not bind`)
        : h("span", { class: "tag quote" }, `quote ${rupees(meta.quote)}`));
    }
    if (meta.fallback) bits.push(h("span", { class: "tag warn" }, "fallback line"));
  }
  if (line.role === "learner" && meta.offer !== null && meta.offer !== undefined) {
    const read = meta.readFrom ? { title: `read from "${meta.readFrom}"` } : {};
    bits.push(h("span", { class: "tag offer", ...read }, `offer ${rupees(meta.offer)}`));
    if (meta.assessment && meta.assessment !== "none") {
      bits.push(h("span", { class: `tag assess assess-${meta.assessment}` }, meta.assessment));
    }
  } else if (line.role === "learner" && meta.readFrom) {
    // The engine read a number but not surely an offer: the vendor asked what was meant.
    bits.push(h("span", { class: "tag offer unsure", title: "the engine was not sure what offer this is" },
      `unsure: "${meta.readFrom}"`));
  }
  const who = line.role === "learner" ? (model.state.learner_id || "Learner") : model.vendor.name;
  const dataset = { key: line.key, turn: line.turn, role: line.role };
  if (meta.mark) dataset.mark = meta.mark;
  if (line.undone) dataset.undone = line.undone;
  const classes = ["line", line.role, line.late && "late", meta.mark && "marked", line.undone && "undone"];
  return h("div", { class: classes.filter(Boolean).join(" "), dataset },
    h("div", { class: "who" }, h("span", { class: "turn-no" }, `T${line.turn}`), who),
    h("div", { class: "bubble" }, line.role === "vendor" ? heardText(line.text, line.heard) : line.text),
    bits.length ? h("div", { class: "meta" }, bits) : null,
    line.role === "vendor" ? flagList(meta.flags) : null);
}

const entryNode = (entry) => (entry.kind === "note" ? noteNode(entry) : lineNode(entry));

// Draws what changed: new entries at the end, stale ones in place; anything else (an undo re-keys
// lines, a snapshot may reorder them) redraws the lot.
function renderConversation() {
  conversation.dirty = false;
  const box = $("lines");
  const entries = sortedEntries();
  const nodes = [...box.querySelectorAll(":scope > [data-key]")];
  const shown = nodes.map((n) => n.dataset.key);
  const prefix = shown.every((key, i) => entries[i] && entries[i].key === key);
  if (!prefix) {
    for (const node of nodes) node.remove();
  } else {
    for (const key of conversation.staleKeys) {
      const i = shown.indexOf(key);
      if (i >= 0) nodes[i].replaceWith(entryNode(model.entries.get(key)));
    }
  }
  conversation.staleKeys.clear();
  const stream = $("stream-line");
  for (const entry of entries.slice(prefix ? shown.length : 0)) {
    const node = entryNode(entry);
    if (stream) box.insertBefore(node, stream);
    else box.append(node);
  }
  view.turnsShown = turnsOnShow();
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

export function renderStream() {
  const box = $("lines");
  let node = $("stream-line");
  const stream = model.stream;
  if (!stream) {
    if (node) node.remove();
    return;
  }
  if (!node) {
    node = h("div", { id: "stream-line", class: "line vendor streaming" },
      h("div", { class: "who" }, h("span", { class: "turn-no" }), model.vendor.name),
      h("div", { class: "bubble" }));
    box.append(node);
  }
  node.dataset.turn = stream.turn;
  node.querySelector(".turn-no").textContent = `T${stream.turn}`;
  node.classList.toggle("withdrawn", Boolean(stream.withdrawn));
  node.querySelector(".bubble").textContent = stream.withdrawn
    ? `${model.vendor.name} thinks again…`
    : stream.text;
  followConversation();
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

// --- coaching cards: the latest turn's, each with where its words come from

function renderTips() {
  const box = $("tips");
  const tips = model.tips;
  const key = tips ? `${tips.turn}:${tips.cards.map((c) => c.card_id).join(",")}` : "";
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.dataset.turn = tips ? tips.turn : "";
  $("tips-earned").textContent = model.earned.size ? `${model.earned.size} grounded so far` : "";
  if (!tips) {
    box.replaceChildren(h("p", { class: "empty" }, "Cards appear after the learner's first turn."));
    return;
  }
  box.replaceChildren(...tips.cards.map((card) => h("article", {
    class: `tip-card ${card.grounded ? "grounded" : "generic"}`,
    dataset: { cardId: card.card_id, grounded: String(card.grounded) },
  },
  h("h3", {}, card.title),
  h("p", { class: "body" }, card.body),
  h("p", { class: "source" }, card.grounded
    ? `from the teacher's notes · ${card.source_chunk_ids.map((id) => id.slice(0, 8)).join(", ")}`
      + ` · confidence ${Math.round(card.confidence_score * 100)}%`
    : "general advice: nothing in the teacher's notes matched"))));
}

// --- the learner report, when the session has ended: the score and its parts as bars, the
// suggestions, the cards earned, and a link to the printable page with its charts.

function renderReport() {
  const box = $("report");
  const r = model.report;
  if (!r) {
    box.hidden = true;
    return;
  }
  if (box.dataset.score === String(r.score)) return;
  box.hidden = false;
  box.dataset.score = r.score;
  const most = { price: 40, respect: 25, goodwill: 20, manners: 15 };
  const params = new URLSearchParams(location.search);
  const link = `/api/sessions/${encodeURIComponent(r.session_id)}/report?format=html&token=`
    + encodeURIComponent(params.get("token") || "");
  box.replaceChildren(
    h("h2", {}, "Learner report ", h("span", { class: "report-score" }, `${r.score}/100`)),
    h("div", { class: "score-bars" }, Object.entries(r.score_parts).map(([part, value]) => h("div", {
      class: "score-bar", dataset: { part },
    }, h("span", { class: "label" }, `${part} ${value}/${most[part] ?? ""}`),
    h("div", { class: "track" }, h("div", {
      class: "fill", style: { width: `${(100 * value) / (most[part] || 100)}%` },
    }))))),
    h("ol", { class: "suggestions" }, r.suggestions.map((s) => h("li", {}, s))),
    ...reportCoaching(r),
    h("p", { class: "small" }, r.cards_earned.length
      ? `Cards earned: ${r.cards_earned.map((c) => c.title).join(" · ")}`
      : "No grounded card this time."),
    h("a", { href: link, target: "_blank", rel: "noopener" }, "Printable report with charts"),
  );
}
