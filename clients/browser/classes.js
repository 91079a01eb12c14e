// The class page: a teacher's classes, their learners (added by id), assignments (a scenario, a
// level, a due date and criteria), and the figures: completion per assignment, each learner's
// sessions, mean score, trend and slips, the class's most common slips, and a CSV export
// (GET /api/classes/{id}/progress, docs/studio.md). Sign-in as on the studio page; server text
// reaches the page as text nodes only.

import { h } from "./common.js";

const $ = (id) => document.getElementById(id);
const view = { loaded: false, classes: [], shown: null, figures: null };
window.samvadClasses = view;

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(path, init);
  if (response.status === 401) {
    location.replace(`/view/signin.html?next=${encodeURIComponent(location.pathname)}`);
    throw new Error("sign in first");
  }
  return { status: response.status, ok: response.ok, body: await response.json().catch(() => ({})) };
}

function say(text) {
  $("message").textContent = text;
}

async function loadClasses() {
  const answer = await api("GET", "/api/classes");
  view.classes = answer.body.classes || [];
  $("count").textContent = String(view.classes.length);
  $("classes").replaceChildren(...view.classes.map((c) => {
    const link = h("a", { href: `#${c.class_id}`, dataset: { classId: c.class_id } }, c.name);
    link.addEventListener("click", (event) => { event.preventDefault(); show(c.class_id); });
    return h("li", {}, link, h("span", { class: "sub" }, ` · ${c.learner_ids.length} learners · ${c.teacher_id}`));
  }));
}

function sparkline(scores) {
  return scores.length ? scores.join(" → ") : "–";
}

async function show(classId) {
  view.shown = classId;
  location.hash = classId;
  const klass = (await api("GET", `/api/classes/${classId}`)).body;
  $("class-title").textContent = `${klass.name} (${klass.learner_ids.length} learners)`;
  $("csv").href = `/api/classes/${classId}/progress?format=csv`;
  $("class").hidden = false;
  const figures = await api("GET", `/api/classes/${classId}/progress`);
  if (!figures.ok) {
    view.figures = null;
    say(figures.body.error ? figures.body.error.message : `HTTP ${figures.status}`);
    return;
  }
  view.figures = figures.body;
  $("assignments").querySelector("tbody").replaceChildren(...figures.body.assignments.map((a) =>
    h("tr", { dataset: { assignmentId: a.assignment_id, completed: a.completed_count } },
      h("td", {}, `${a.title || a.scenario} · ${a.level}`), h("td", {}, new Date(a.due_at * 1000).toLocaleDateString()),
      h("td", {}, `${a.completed_count} of ${a.learners}`), h("td", {}, String(a.attempted.length)),
      h("td", {}, `${a.completion_pct} %`))));
  $("learners").querySelector("tbody").replaceChildren(...figures.body.learners.map((l) =>
    h("tr", { dataset: { learnerId: l.learner_id } }, h("td", {}, l.learner_id), h("td", {}, String(l.sessions)),
      h("td", {}, String(l.deals)), h("td", {}, l.mean_score === null ? "–" : String(l.mean_score)),
      h("td", {}, sparkline(l.trend)),
      h("td", {}, Object.entries(l.slips).map(([s, n]) => `${s} x${n}`).join(", ") || "–"),
      h("td", {}, String(l.completed.length)))));
  $("slips").replaceChildren(...figures.body.common_slips.map((s) => h("li", {}, `${s.slip}: ${s.count}`)));
  view.loaded = true;
}

async function main() {
  const who = await (await fetch("/api/signin", { credentials: "same-origin" })).json();
  if (!who.admin && !who.teacher) {
    location.replace(`/view/signin.html?next=${encodeURIComponent(location.pathname)}`);
    return;
  }
  $("who").textContent = who.teacher ? `teacher ${who.teacher}` : "the admin";
  const listed = await (await fetch("/api/scenarios")).json();
  $("a-scenario").replaceChildren(...(listed.scenarios || []).map((s) => h("option", { value: s.id }, s.title)));
  $("create").addEventListener("click", async () => {
    const answer = await api("POST", "/api/classes", { name: $("class-name").value.trim() });
    if (!answer.ok) return say(answer.body.error ? answer.body.error.message : `HTTP ${answer.status}`);
    await loadClasses();
    await show(answer.body.class_id);
  });
  $("add-learners").addEventListener("click", async () => {
    const ids = $("learner-ids").value.split(/[\s,]+/).filter(Boolean);
    const answer = await api("POST", `/api/classes/${view.shown}/learners`, { learner_ids: ids });
    if (!answer.ok) return say(answer.body.error ? answer.body.error.message : `HTTP ${answer.status}`);
    $("learner-ids").value = "";
    await show(view.shown);
  });
  $("assign").addEventListener("click", async () => {
    const due = $("a-due").value ? Date.parse(`${$("a-due").value}T23:59:59`) / 1000 : Date.now() / 1000 + 7 * 86400;
    const hints = $("a-hints").value;
    const answer = await api("POST", `/api/classes/${view.shown}/assignments`, {
      scenario: $("a-scenario").value, level: $("a-level").value, due_at: due,
      criteria: { within_fair_pct: Number($("a-fair").value), no_insult: $("a-insult").checked,
        max_hints: hints === "" ? null : Number(hints) } });
    if (!answer.ok) return say(answer.body.error ? answer.body.error.message : `HTTP ${answer.status}`);
    say("assignment set");
    await show(view.shown);
  });
  await loadClasses();
  const wanted = location.hash.slice(1);
  if (wanted) await show(wanted);
  $("status").dataset.state = "live";
  $("status").textContent = "ready";
  view.ready = true;
}

main().catch((error) => {
  $("fatal").textContent = String(error.message || error);
  $("fatal").hidden = false;
});
