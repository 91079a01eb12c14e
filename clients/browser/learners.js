// The teacher's learners page: every learner with their latest session and trend, and one
// learner's progress over sessions as charts (discount, turns to a deal, score, hints), with a
// link to each session's report, and their review items with each one's retention. It reads the API again every 15 s (profiles change when
// sessions end, not turn by turn, so there is no socket).
//
// The teacher signs in once (/view/signin.html); the browser then sends the HttpOnly sign-in cookie
// with every request, and no key is ever in this page's URL or script. The learner shown is the
// URL's #fragment. Report links carry the short-lived report token of their session that the server
// put in `report_url`, which opens that report and nothing else. Text from the server reaches the
// page only as text nodes (`h()`), never as HTML.

import { h, stageColor } from "./common.js";

const $ = (id) => document.getElementById(id);

const view = { loaded: false, learners: [], shown: null, progress: [], charts: {} };
window.samvadLearners = view;

const TRENDS = {
  new: { text: "new", color: "#64748b" },
  improving: { text: "▲ improving", color: "#16a34a" },
  steady: { text: "● steady", color: "#d97706" },
  declining: { text: "▼ declining", color: "#dc2626" },
};
const OUTCOMES = { deal: "DEAL", walked_away: "WALKAWAY", no_deal: "CLOSURE", turn_limit: "CLOSURE",
  stopped: "CLOSURE", timed_out: "CLOSURE" };

function setStatus(state, text) {
  const node = $("status");
  node.dataset.state = state;
  node.textContent = text;
}

function fatal(text) {
  setStatus("failed", "failed");
  const node = $("fatal");
  node.textContent = text;
  node.hidden = false;
}

async function api(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  if (response.status === 401) {
    location.replace(`/view/signin.html?next=${encodeURIComponent(location.pathname + location.hash)}`);
    throw new Error("This server needs its admin key: sign in first");
  }
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error((body.error && body.error.message) || `${path}: HTTP ${response.status}`);
  }
  return response.json();
}

function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "–";
}

function outcomeChip(outcome) {
  return h("span", { class: "chip", style: { background: stageColor(OUTCOMES[outcome]) } },
    outcome.replace("_", " "));
}

function learnerRow(row) {
  const latest = row.latest;
  const trend = TRENDS[row.trend] || TRENDS.new;
  return h("tr", { dataset: { learnerId: row.learner_id, trend: row.trend } },
    h("td", {}, h("span", { class: "learner-name" }, row.learner_id)),
    h("td", {}, row.level),
    h("td", { class: "num" }, String(row.sessions)),
    h("td", {}, latest ? [outcomeChip(latest.outcome),
      h("span", { class: "small" }, `${latest.scenario} · ${when(latest.at)}`)] : "–"),
    h("td", { class: "num" }, latest ? String(latest.score) : "–"),
    h("td", {}, h("span", { class: "trend", style: { color: trend.color } }, trend.text),
      row.trend_delta === null ? null : h("span", { class: "small" },
        `${row.trend_delta > 0 ? "+" : ""}${row.trend_delta} points`)),
    h("td", {}, h("a", { class: "watch-link progress-link", href: `#${encodeURIComponent(row.learner_id)}` },
      "Progress →")));
}

function renderList() {
  const body = $("learners").querySelector("tbody");
  body.replaceChildren(...view.learners.map(learnerRow));
  $("empty").hidden = view.learners.length > 0;
  $("count").textContent = String(view.learners.length);
}

function fact(name, value) {
  return h("div", {}, h("dt", {}, name), h("dd", {}, value));
}

function renderProfile(answer) {
  const p = answer.profile;
  const pending = Object.entries(p.pending).map(([name, v]) => `${name}: ${v.value} (${v.sessions} of 2)`);
  const best = p.best_discounts.map((b) => `${b.item} ${b.discount_pct}% (${b.paid})`);
  $("detail-title").textContent = `${p.learner_id}: ${p.sessions} session${p.sessions === 1 ? "" : "s"}`;
  $("profile").replaceChildren(
    fact("Level", p.level),
    fact("Speaks · practises", `${p.input_language} · ${p.target_language}`),
    fact("Waiting to be confirmed", pending.join(", ") || "nothing"),
    fact("Best discounts", best.join(", ") || "no deal yet"),
    fact("Recurring slips", p.recurring_slips.join(", ").replaceAll("_", " ") || "none"),
  );
}

const SERIES = {
  "chart-discount": { key: "discount_pct", color: "#16a34a" },
  "chart-turns": { key: "turns_to_deal", color: "#4f46e5" },
  "chart-score": { key: "score", color: "#b45309" },
  "chart-hints": { key: "hints", color: "#0284c7" },
  "chart-fluency": { key: "words_per_minute", color: "#9333ea" }, // spoken sessions only: gaps between
};

const Y_FLOOR = { score: 100, discount_pct: 100, words_per_minute: 150 };

function drawCharts() {
  for (const plot of Object.values(view.charts)) plot.destroy();
  view.charts = {};
  const xs = view.progress.map((_, i) => i + 1);
  for (const [id, { key, color }] of Object.entries(SERIES)) {
    const ys = view.progress.map((p) => (p[key] === null || p[key] === undefined ? null : p[key]));
    const node = $(id);
    node.dataset.points = String(ys.filter((y) => y !== null).length);
    node.querySelectorAll(".uplot").forEach((old) => old.remove());
    view.charts[id] = new uPlot({
      width: Math.max(260, node.clientWidth - 16),
      height: 170,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false, range: [0.5, Math.max(2, xs.length) + 0.5] },
        y: { range: (_u, _min, max) => [0, Math.max(Y_FLOOR[key] ?? 5, max || 0)] } },
      axes: [
        { incrs: [1, 2, 5, 10], values: (_u, splits) => splits.map((v) => (Number.isInteger(v) ? `#${v}` : "")),
          font: "13px system-ui, sans-serif", size: 30 },
        { font: "13px system-ui, sans-serif", size: 44 },
      ],
      series: [{}, { label: key, stroke: color, width: 3, spanGaps: true,
        points: { show: true, size: 9, fill: "#ffffff", width: 2.5 } }],
    }, [xs, ys], node);
  }
}

function fluencyTitle(point) {
  if (point.words_per_minute === null || point.words_per_minute === undefined) return "typed, not spoken";
  return `${point.words_per_minute} words a minute, ${Math.round(100 * point.pause_ratio)}% in pauses, `
    + `${point.mean_length_of_run} words between pauses, ${point.fillers} fillers`;
}

function progressRow(point, index) {
  return h("tr", { dataset: { sessionId: point.session_id, outcome: point.outcome } },
    h("td", { class: "num" }, String(index + 1)),
    h("td", {}, when(point.at)),
    h("td", {}, point.scenario, point.item ? h("span", { class: "small" }, point.item) : null),
    h("td", { title: point.estimated_band ? `estimated ${point.estimated_band}, `
      + `${Math.round(100 * point.estimate_confidence)}% sure` : "" },
    point.level, point.estimated_band ? h("span", { class: "small estimate" }, `est. ${point.estimated_band}`) : null),
    h("td", {}, outcomeChip(point.outcome)),
    h("td", { class: "num" }, point.turns_to_deal === null ? "–" : String(point.turns_to_deal)),
    h("td", { class: "num" }, point.discount_pct === null ? "–" : `${point.discount_pct}%`),
    h("td", { class: "num" }, String(point.score)),
    h("td", { class: "num" }, String(point.hints)),
    h("td", { class: "num fluency", title: fluencyTitle(point) },
      point.words_per_minute === null || point.words_per_minute === undefined ? "–" : `${point.words_per_minute}`),
    h("td", {}, h("a", { class: "watch-link report-link", href: point.report_url, target: "_blank", rel: "noopener" },
      "Report →")));
}

const KINDS = { phrase: "phrase", respect: "habit to build", avoid: "habit to drop" };

// One review item (docs/learning.md): its phrase, reviews, the FSRS due date and the chance the
// learner recalls it now (the server's `retention`, a bar from red to green).
function itemRow(item) {
  const last = item.history.length ? item.history[item.history.length - 1] : null;
  const percent = Math.round(item.retention * 100);
  const hue = Math.round(item.retention * 120);
  return h("tr", { dataset: { itemId: item.item_id, kind: item.kind, retention: String(item.retention),
    due: item.is_due ? "due" : "later" } },
    h("td", {}, item.phrase, item.english ? h("span", { class: "small" }, item.english) : null),
    h("td", {}, KINDS[item.kind] || item.kind),
    h("td", { class: "num" }, String(item.reps)),
    h("td", {}, last ? last.rating : "–"),
    h("td", {}, item.is_due ? "due now" : when(item.due)),
    h("td", { class: "num retention" },
      h("span", { class: "retention-bar", style: { width: `${percent}%`, background: `hsl(${hue} 70% 45%)` } }),
      `${percent}%`));
}

async function showLearner(learnerId) {
  const detail = $("detail");
  if (!learnerId) {
    detail.hidden = true;
    view.shown = null;
    return;
  }
  const answer = await api(`/api/learners/${encodeURIComponent(learnerId)}`);
  view.shown = learnerId;
  view.progress = answer.progress;
  detail.hidden = false;
  renderProfile(answer);
  $("progress").querySelector("tbody").replaceChildren(...answer.progress.map(progressRow));
  $("items").querySelector("tbody").replaceChildren(...answer.items.map(itemRow));
  $("no-items").hidden = answer.items.length > 0;
  drawCharts();
  for (const tr of $("learners").querySelectorAll("tbody tr")) {
    tr.classList.toggle("selected", tr.dataset.learnerId === learnerId);
  }
}

const REFRESH_MS = 15000; // learners appear as their sessions end: the page reads again this often

async function load() {
  try {
    const listing = await api("/api/learners");
    view.learners = listing.learners;
    $("store").textContent = listing.durable ? "in Neo4j" : "in memory (until restart)";
    renderList();
    await showLearner(decodeURIComponent(location.hash.slice(1)));
    view.loaded = true;
    view.refreshed = Date.now();
    setStatus("live", "up to date");
  } catch (error) {
    fatal(error.message);
  }
}

window.addEventListener("hashchange", () => {
  showLearner(decodeURIComponent(location.hash.slice(1))).catch((error) => fatal(error.message));
});
load().then(() => setInterval(() => { if (!$("fatal").hidden) return; load(); }, REFRESH_MS));
