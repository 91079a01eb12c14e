// The teachers' studio: a scenario pack as a form, a try-it panel that plays the draft as a learner
// would, publishing, and a diff between versions (docs/studio.md).
//
// The form is made from the shape of a pack (a shipped one, or the scenario's own): every field an
// input whose `data-field` is the field as the server names it in a refusal (`items[2].floor`,
// `lines.en-IN.hold`), so each problem of a 422 `invalid_pack` lands beside its field. Lists of
// words (lines, hints, cue words, safety lines, fillers) are one entry a line; pairs of numbers are
// "low, high"; lists of objects (items, phrases, customs) have Add and Remove. An empty form keeps
// the shape and clears every value. A published version is shown read-only: it is never edited,
// only superseded (edit it as a new draft, publish, and it becomes the next version).
//
// The teacher signs in once (/view/signin.html, the admin key or their teacher token); the page
// sends the HttpOnly cookie and holds no key. Server text reaches the page as text nodes only.

import { h, wsUrl } from "./common.js";
import { explain } from "./flags.js";

const $ = (id) => document.getElementById(id);
const view = { loaded: false, scenario: null, isNew: false, readOnly: false, problems: [], preview: null,
  replies: [], ended: null, versions: [] };
window.samvadStudio = view;

function setStatus(state, text) {
  $("status").dataset.state = state;
  $("status").textContent = text;
}

function fatal(text) {
  setStatus("failed", "failed");
  $("fatal").textContent = text;
  $("fatal").hidden = false;
}

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
  const answer = await response.json().catch(() => ({}));
  return { status: response.status, ok: response.ok, body: answer };
}

// ------------------------------------------------------------------ the form

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const scalar = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);

function blank(value) {
  if (Array.isArray(value)) {
    if (value.length && isObject(value[0])) return [blank(value[0])];
    return [];
  }
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, blank(v)]));
  if (typeof value === "number") return null;
  if (typeof value === "boolean") return false;
  if (typeof value === "string") return "";
  return null;
}

function kindOf(value, shape) {
  const v = shape === undefined ? value : shape;
  if (Array.isArray(v)) {
    if (v.length && isObject(v[0])) return "list";
    if (v.length && v.every((x) => typeof x === "number")) return "numbers";
    return "strings";
  }
  if (isObject(v)) return "object";
  if (typeof v === "number") return "number";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "string") return "string";
  return "nullable";
}

function leaf(kind, value, field) {
  let input;
  if (kind === "strings") {
    input = h("textarea", { rows: Math.min(6, Math.max(2, (value || []).length)), "data-field": field });
    input.value = (value || []).join("\n");
  } else if (kind === "numbers") {
    input = h("input", { "data-field": field, placeholder: "low, high" });
    input.value = (value || []).join(", ");
  } else if (kind === "bool") {
    input = h("input", { type: "checkbox", "data-field": field });
    input.checked = value === true;
  } else if (kind === "number") {
    input = h("input", { type: "number", step: "any", "data-field": field });
    input.value = value === null || value === undefined ? "" : String(value);
  } else {
    const long = typeof value === "string" && value.length > 70;
    input = long ? h("textarea", { rows: 2, "data-field": field }) : h("input", { "data-field": field });
    input.value = value === null || value === undefined ? "" : String(value);
  }
  input.dataset.kind = kind;
  return input;
}

// A node of the form: `shape` says the kind (an empty list keeps its template's kind).
function node(key, value, field, shape) {
  const kind = kindOf(value, shape);
  const wrap = h("div", { class: `node node-${kind}`, dataset: { key, kind, path: field } });
  if (kind === "object") {
    const box = h("fieldset", {}, h("legend", { text: key }));
    for (const [k, v] of Object.entries(value || {})) {
      box.append(node(k, v, field ? `${field}.${k}` : k, shape && isObject(shape) ? shape[k] : undefined));
    }
    wrap.append(box);
  } else if (kind === "list") {
    const model = (shape && shape[0]) || value[0];  // the kinds of an entry's fields
    const template = blank(model);  // a new entry: that shape, every value cleared
    const items = h("div", { class: "items" });
    const box = h("fieldset", {}, h("legend", { text: key }), items);
    const add = h("button", { type: "button", class: "add", dataset: { list: field } }, `Add to ${key}`);
    const refill = () => [...items.children].forEach((child, i) => relabel(child, `${field}[${i}]`));
    const push = (v) => {
      const entry = node(String(items.children.length), v, `${field}[${items.children.length}]`, model);
      const remove = h("button", { type: "button", class: "remove" }, "Remove");
      remove.addEventListener("click", () => { entry.remove(); refill(); });
      entry.append(remove);
      items.append(entry);
    };
    (value || []).forEach(push);
    add.addEventListener("click", () => push(JSON.parse(JSON.stringify(template))));
    box.append(add);
    wrap.append(box);
  } else {
    wrap.append(h("label", {}, h("span", { class: "name", text: key }), leaf(kind, value, field)));
  }
  wrap.append(h("p", { class: "problem", hidden: true }));
  return wrap;
}

// Renumber a list entry's fields after a removal: `items[3].floor` becomes `items[2].floor`.
function relabel(entry, path) {
  const old = entry.dataset.path;
  entry.dataset.key = path.slice(path.lastIndexOf("[") + 1, -1);
  for (const el of [entry, ...entry.querySelectorAll("[data-path]")]) {
    el.dataset.path = path + el.dataset.path.slice(old.length);
  }
  for (const el of entry.querySelectorAll("[data-field]")) {
    el.dataset.field = path + el.dataset.field.slice(old.length);
  }
}

function readLeaf(input) {
  const kind = input.dataset.kind;
  const text = input.value;
  if (kind === "strings") return text.split("\n").map((s) => s.trim()).filter(Boolean);
  if (kind === "numbers") return text.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  if (kind === "bool") return input.checked;
  if (kind === "number") return text.trim() === "" ? null : Number(text);
  if (kind === "nullable") {
    if (text.trim() === "") return null;
    return Number.isNaN(Number(text)) ? text : Number(text);
  }
  return text;
}

function collect(wrap) {
  const kind = wrap.dataset.kind;
  if (kind === "object") {
    const out = {};
    for (const child of wrap.querySelectorAll(":scope > fieldset > .node")) out[child.dataset.key] = collect(child);
    return out;
  }
  if (kind === "list") return [...wrap.querySelectorAll(":scope > fieldset > .items > .node")].map(collect);
  return readLeaf(wrap.querySelector("[data-field]"));
}

function renderForm(manifest, shape, readOnly) {
  const form = $("pack-form");
  form.replaceChildren();
  const root = node("pack", manifest, "", shape);
  root.dataset.root = "true";
  form.append(root);
  view.readOnly = readOnly;
  for (const el of form.querySelectorAll("input, textarea, button")) el.disabled = readOnly;
  for (const id of ["save", "try", "publish"]) $(id).hidden = readOnly;
  $("edit-version").hidden = !readOnly;
  $("editor").hidden = false;
  clearProblems();
}

function manifestOfForm() {
  return collect($("pack-form").querySelector("[data-root]"));
}

// ------------------------------------------------------------------ problems

function clearProblems() {
  view.problems = [];
  $("problems").replaceChildren();
  $("problems").hidden = true;
  for (const el of document.querySelectorAll(".node.invalid")) el.classList.remove("invalid");
  for (const el of document.querySelectorAll(".node > .problem")) { el.hidden = true; el.textContent = ""; }
}

// The form's node for a field the server named: itself, else its nearest enclosing node.
function nodeFor(field) {
  const nodes = [...document.querySelectorAll("#pack-form .node")];
  let best = null;
  for (const n of nodes) {
    const path = n.dataset.path;
    if (path === field) return n;
    if (path && (field.startsWith(`${path}.`) || field.startsWith(`${path}[`))
        && (!best || path.length > best.dataset.path.length)) best = n;
  }
  return best || document.querySelector("#pack-form [data-root]");
}

function showProblems(problems) {
  clearProblems();
  view.problems = problems;
  for (const problem of problems) {
    const n = nodeFor(problem.field);
    n.classList.add("invalid");
    const note = n.querySelector(":scope > .problem");
    note.textContent = note.textContent ? `${note.textContent}; ${problem.message}` : problem.message;
    note.hidden = false;
    const link = h("a", { href: "#", dataset: { problem: problem.field } }, problem.field);
    link.addEventListener("click", (event) => {
      event.preventDefault();
      const input = n.querySelector("[data-field]");
      (input || n).scrollIntoView({ block: "center" });
      if (input) input.focus();
    });
    $("problems").append(h("li", {}, link, ": ", problem.message));
  }
  $("problems").hidden = problems.length === 0;
}

// ------------------------------------------------------------------ drafts, publishing

async function save() {
  const manifest = manifestOfForm();
  const id = view.scenario;
  manifest.scenario = id;
  const answer = view.isNew ? await api("POST", "/api/scenarios", manifest)
    : await api("PUT", `/api/scenarios/${encodeURIComponent(id)}`, manifest);
  if (answer.status === 422 && answer.body.error && answer.body.error.problems) {
    showProblems(answer.body.error.problems);
    $("saved").textContent = `refused: ${answer.body.error.problems.length} problem(s)`;
    return false;
  }
  if (!answer.ok) {
    $("saved").textContent = (answer.body.error && answer.body.error.message) || `HTTP ${answer.status}`;
    return false;
  }
  clearProblems();
  view.isNew = false;
  $("saved").textContent = "draft saved";
  return true;
}

async function publish() {
  if (!(await save())) return;
  const answer = await api("POST", `/api/scenarios/${encodeURIComponent(view.scenario)}/publish`);
  if (answer.status === 422 && answer.body.error.problems) {
    showProblems(answer.body.error.problems);
    return;
  }
  if (!answer.ok) {
    $("saved").textContent = answer.body.error ? answer.body.error.message : `HTTP ${answer.status}`;
    return;
  }
  $("saved").textContent = `published as version ${answer.body.version}`;
  view.published = answer.body.version;
  await loadScenario(view.scenario);
}

// ------------------------------------------------------------------ try it

let socket = null;
let frameIds = 0;

function logLine(kind, ...children) {
  const li = h("li", { class: `try-${kind}`, dataset: { kind } }, ...children);
  $("try-log").append(li);
  li.scrollIntoView({ block: "nearest" });
  return li;
}

async function tryIt() {
  if (!(await save())) return;
  const tried = await api("POST", `/api/scenarios/${encodeURIComponent(view.scenario)}/try`);
  if (!tried.ok) {
    if (tried.body.error && tried.body.error.problems) showProblems(tried.body.error.problems);
    return;
  }
  view.preview = tried.body.preview;
  view.replies = [];
  view.ended = null;
  const created = await api("POST", "/api/sessions", { scenario: view.preview });
  if (!created.ok) {
    fatal(created.body.error ? created.body.error.message : `HTTP ${created.status}`);
    return;
  }
  view.session = created.body;
  $("try-log").replaceChildren();
  $("try-report").hidden = true;
  const items = manifestOfForm().items || [];
  $("try-item").replaceChildren(...items.map((item) => h("option", { value: item.name }, item.name)));
  $("try-panel").hidden = false;
  if (socket) socket.close();
  socket = new WebSocket(wsUrl(`${created.body.ws_url}?token=${created.body.player_token}`), ["samvad.v1.json"]);
  socket.addEventListener("message", (event) => onFrame(JSON.parse(event.data)));
  await new Promise((resolve) => socket.addEventListener("open", resolve, { once: true }));
}

function hold() {
  const item = $("try-item").value;
  if (item && socket) socket.send(JSON.stringify({ type: "scene", id: `s${++frameIds}`, object_grabbed: item }));
}

function onFrame(frame) {
  if (frame.type === "welcome") {
    view.welcomed = true;
    hold();
    logLine("system", `${frame.state.negotiation_state}: the vendor is waiting (scenario ${view.preview})`);
  } else if (frame.type === "reply") {
    view.replies.push(frame);
    const flags = frame.flags || [];
    logLine("reply", h("b", {}, "Vendor: "), frame.text,
      h("span", { class: "sub" }, ` · ${frame.negotiation_state} · mood ${frame.vendor_mood}`
        + (frame.counter_price !== null ? ` · quote ${frame.counter_price}` : "")
        + (frame.offer_assessment && frame.offer_assessment !== "none" ? ` · offer ${frame.offer_assessment}` : "")),
      flags.length ? h("ul", { class: "flags", dataset: { flags: flags.join(" ") } },
        ...flags.map((flag) => h("li", { title: flag }, explain(flag)))) : null);
  } else if (frame.type === "tips") {
    for (const card of frame.cards || []) logLine("tip", h("b", {}, `Tip: ${card.title}. `), card.body);
  } else if (frame.type === "hint") {
    logLine("hint", h("b", {}, "Hint: "), frame.text, frame.english ? ` (${frame.english})` : "");
  } else if (frame.type === "session.ended") {
    view.ended = frame;
    logLine("ended", h("b", {}, `Ended: ${frame.outcome}`),
      frame.summary.final_price !== null ? ` at ${frame.summary.final_price}` : "");
    const report = $("try-report");
    report.src = `/api/sessions/${view.session.session_id}/report?format=html&token=${view.session.spectator_token}`;
    report.hidden = false;
  } else if (frame.type === "error") {
    logLine("error", `${frame.code}: ${frame.message}`);
  }
}

function say() {
  const text = $("try-say").value.trim();
  if (!text || !socket) return;
  $("try-say").value = "";
  logLine("learner", h("b", {}, "You: "), text);
  socket.send(JSON.stringify({ type: "transcript", id: `t${++frameIds}`, text }));
}

// ------------------------------------------------------------------ versions and the diff

function flatten(value, path = "", out = {}) {
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, path ? `${path}.${k}` : k, out);
  } else if (Array.isArray(value) && value.some((v) => !scalar(v))) {
    value.forEach((v, i) => flatten(v, `${path}[${i}]`, out));
  } else {
    out[path] = JSON.stringify(value);
  }
  return out;
}

async function manifestOf(version) {
  const answer = await api("GET", `/api/scenarios/${encodeURIComponent(view.scenario)}?version=${version}`);
  return answer.body.manifest;
}

async function diff() {
  const [a, b] = [$("diff-a").value, $("diff-b").value];
  const before = flatten(await manifestOf(a));
  const after = flatten(await manifestOf(b));
  const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const rows = fields.filter((f) => before[f] !== after[f] && f !== "version")
    .map((f) => h("tr", { dataset: { field: f } }, h("td", {}, f), h("td", {}, before[f] ?? "–"),
      h("td", {}, after[f] ?? "–")));
  $("diff-table").querySelector("tbody").replaceChildren(...rows);
  $("diff-table").hidden = false;
  view.diff = fields.filter((f) => before[f] !== after[f] && f !== "version");
}

async function showVersion(number) {
  const manifest = await manifestOf(number);
  view.viewing = number;
  renderForm(manifest, undefined, true);
  $("editing").textContent = `version ${number} (published: read-only)`;
}

async function loadVersions() {
  const answer = await api("GET", `/api/scenarios/${encodeURIComponent(view.scenario)}/versions`);
  if (!answer.ok) return;
  view.versions = answer.body.versions;
  const rows = view.versions.map((v) => {
    const open = h("button", { type: "button", class: "view-version", dataset: { version: v.version } }, "View");
    open.addEventListener("click", () => showVersion(v.version));
    return h("tr", { dataset: { version: v.version } }, h("td", {}, String(v.version)), h("td", {}, v.source),
      h("td", {}, v.published_at ? new Date(v.published_at * 1000).toLocaleString() : "shipped"), h("td", {}, open));
  });
  $("versions").querySelector("tbody").replaceChildren(...rows);
  const options = () => view.versions.map((v) => h("option", { value: v.version }, `version ${v.version}`));
  $("diff-a").replaceChildren(...options());
  $("diff-b").replaceChildren(...options());
  if (view.versions.length > 1) $("diff-a").value = String(view.versions[view.versions.length - 2].version);
  $("diff-b").value = String(view.versions[view.versions.length - 1].version);
  $("versions-panel").hidden = false;
}

// ------------------------------------------------------------------ opening

async function loadScenario(id) {
  const answer = await api("GET", `/api/scenarios/${encodeURIComponent(id)}`);
  if (!answer.ok) {
    fatal(answer.body.error ? answer.body.error.message : `HTTP ${answer.status}`);
    return;
  }
  view.scenario = id;
  view.isNew = false;
  $("current-id").textContent = id;
  $("current-version").textContent = answer.body.current ? String(answer.body.current) : "none yet";
  const draft = answer.body.draft;
  renderForm(draft || answer.body.manifest, undefined, false);
  $("editing").textContent = draft ? "the draft" : `a new draft from version ${answer.body.version}`;
  await loadVersions();
}

async function startNew(empty) {
  const id = $("new-id").value.trim();
  if (!/^[a-z0-9][a-z0-9-]{1,62}$/.test(id)) {
    $("mode").textContent = "A scenario id is lower-case letters, digits and dashes.";
    return;
  }
  const shape = await api("GET", `/api/scenarios/${encodeURIComponent($("shape").value)}`);
  const manifest = shape.body.manifest;
  view.scenario = id;
  view.isNew = true;
  $("current-id").textContent = id;
  $("current-version").textContent = "none yet";
  const start = empty ? blank(manifest) : { ...manifest };
  start.scenario = id;
  renderForm(start, manifest, false);
  $("editing").textContent = empty ? `a new scenario: an empty form in the shape of ${$("shape").value}`
    : `a new scenario: a copy of ${$("shape").value}`;
  $("versions-panel").hidden = true;
}

async function main() {
  const who = await (await fetch("/api/signin", { credentials: "same-origin" })).json();
  if (!who.admin && !who.teacher) {
    location.replace(`/view/signin.html?next=${encodeURIComponent(location.pathname)}`);
    return;
  }
  $("who").textContent = who.teacher ? `teacher ${who.teacher}` : "the admin";
  const listed = await (await fetch("/api/scenarios")).json();
  const ids = (listed.scenarios || []).map((s) => s.scenario || s.id || s.name).filter(Boolean);
  $("existing").replaceChildren(...ids.map((id) => h("option", { value: id }, id)));
  $("shape").replaceChildren(...ids.map((id) => h("option", { value: id }, id)));
  $("open").addEventListener("click", () => loadScenario($("existing").value));
  $("new-empty").addEventListener("click", () => startNew(true));
  $("new-copy").addEventListener("click", () => startNew(false));
  $("save").addEventListener("click", save);
  $("publish").addEventListener("click", publish);
  $("try").addEventListener("click", tryIt);
  $("try-send").addEventListener("click", say);
  $("try-say").addEventListener("keydown", (event) => { if (event.key === "Enter") say(); });
  $("try-item").addEventListener("change", hold);
  $("try-hint").addEventListener("click", () => socket && socket.send(JSON.stringify(
    { type: "command", id: `h${++frameIds}`, name: "hint" })));
  $("diff").addEventListener("click", diff);
  $("edit-version").addEventListener("click", () => {
    const manifest = manifestOfForm();
    renderForm(manifest, undefined, false);
    $("editing").textContent = `a new draft from version ${view.viewing}: publishing it makes the next version`;
  });
  setStatus("live", "ready");
  view.loaded = true;
}

main().catch((error) => fatal(String(error.message || error)));
