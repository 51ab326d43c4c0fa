// fedsearch's page (SPEC §9): plain JavaScript, no build step, no request to any other host.
//
// The state is one SearchRequest (`state.req`), the one source of truth: the box, the toggles
// (Aa, .*, ≈), the context, the chips, the URL and the request sent are all derived from it, and
// every control changes it, never the page. It is kept with an empty query too, so a toggle
// pressed before typing stays pressed. The URL carries it as GET /v1/search's parameters, so a
// link reproduces the search and Back works; a search streams through POST /v1/search/stream with
// that request as its body, so a next action's `args` are posted verbatim. Everything shown is put in the page as text (textContent), never as
// markup: a file or a line holding <script> is shown, not run.
"use strict";

// A person's budgets (gateway/sizing.py PERSON): the files asked for unless truly enormous. Sent with
// every search; a browser's GET /v1/search gets the same where it names none.
const PAGE_FIELDS = { hit_budget: 5000, char_budget: 2000000 };
const DEFAULTS = { mode: "exact", context_lines: 0, files: 20, offset: 0, timeout_ms: 5000, threshold: 0.5, hit_lines: 3, ...PAGE_FIELDS };
// GET parameter -> SearchRequest field (lists repeat), as the gateway reads them.
const SCALARS = { q: "query", mode: "mode", case: "case_sensitive", context: "context_lines", files: "files", offset: "offset",
  hit_budget: "hit_budget", char_budget: "char_budget", hit_lines: "hit_lines", timeout_ms: "timeout_ms", threshold: "threshold" };
const LISTS = { ns: "namespaces", path: "paths", lang: "languages" };
const NUMBERS = new Set(["context_lines", "files", "offset", "hit_budget", "char_budget", "hit_lines", "timeout_ms", "threshold"]);
const TYPING_DELAY_MS = 180;
const VIEW_LINES = 20000;  // a person's file view: the whole file up to this many lines, then slices (SPEC §9)
const VIEW_CHUNK = 2000;   // a slice is read (and coloured by the gateway) this many lines at a time, each shown as it comes
const TOKEN_KEY = "fedsearch.token";
const STATUS_CLASS = { ok: "ok", capped: "capped", timeout: "timeout", error: "error", unavailable: "unavailable", unsupported: "unsupported" };

const $ = (id) => document.getElementById(id);
const LANGUAGES = JSON.parse($("languages").textContent || "{}");

const state = {
  req: { query: "" }, // the SearchRequest shown: the one state the controls, the URL and the request derive from
  typing: 0,          // the timer of a search being typed
  run: null,          // {id, controller} of the search in flight
  runs: 0,
  answer: null,       // the last answer or provisional page: {files, file_count, namespaces, ...}
  facets: null,       // {answer, counts}: that answer's facets over all its files (/v1/facets)
  statuses: new Map(),  // namespace -> NamespaceStatus, as they settle
  total: 0, done: 0, final: false,
  parsed: null,       // /v1/query's account of state.req (pattern, mode, case, filters)
  matcher: null,      // a RegExp finding the pattern in a line, or null
  described: Promise.resolve(),  // settles once state.matcher is the shown request's
  namespaces: [],     // /v1/namespaces
  retry: null,        // what to do again once a token is given
  viewerPushed: false,
  viewerFirst: 1,      // the first line the file viewer holds
  viewerLast: 0,       // the last line it holds
  viewerTotal: 0,      // the file's lines
  viewerRuns: 0,       // files opened: lines read for an earlier one are dropped
  viewerMore: null,    // reads the file's next slice, while lines are left
  viewerReading: null, // the slice being read (settles once it is shown)
  viewerAimed: false,  // whether the view has gone to the line or hit it was opened at
  viewerStepped: false,  // whether n / N moved since
  currentMatch: null,  // the match n / N stand on
};

// --- small DOM helpers: text only -------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function plural(n, one, many) { return `${n.toLocaleString()} ${n === 1 ? one : (many || one + "s")}`; }

// --- the request <-> the URL ---------------------------------------------------------------

function requestFromParams(params) {
  const req = {};
  for (const [param, field] of Object.entries(SCALARS)) {
    if (!params.has(param)) continue;
    let value = params.get(param);
    if (field === "case_sensitive") value = value === "true" ? true : value === "false" ? false : null;
    else if (NUMBERS.has(field)) value = Number(value);
    req[field] = value;
  }
  for (const [param, field] of Object.entries(LISTS)) {
    const values = params.getAll(param);
    if (values.length) req[field] = values;
  }
  req.query = req.query || "";
  return req;
}

// Whether a request has anything to search for (a toggle pressed on an empty box does not search).
function searches(req) { return Boolean(req && req.query && req.query.trim()); }

function paramsFromRequest(req) {
  const params = new URLSearchParams();
  for (const [param, field] of Object.entries(SCALARS)) {
    const value = req[field];
    if (value === undefined || value === null || value === "" || value === DEFAULTS[field]) continue;
    params.set(param, String(value));
  }
  for (const [param, field] of Object.entries(LISTS)) {
    for (const value of req[field] || []) params.append(param, value);
  }
  return params;
}

function searchUrl(req) {
  const params = paramsFromRequest(req).toString();
  return "/" + (params ? "?" + params : "");
}

// --- talking to the gateway -------------------------------------------------------------

function headers(json) {
  const out = {};
  if (json) out["Content-Type"] = "application/json";
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) out.Authorization = "Bearer " + token;
  return out;
}

async function problemOf(response) {
  try {
    const body = await response.json();
    return body && typeof body === "object" ? body : { detail: response.statusText };
  } catch {
    return { detail: `${response.status} ${response.statusText}` };
  }
}

function askToken(retry, problem) {
  state.retry = retry;
  const dialog = $("token-dialog");
  $("token-problem").hidden = !problem;
  $("token-problem").textContent = problem || "";
  if (!dialog.open) dialog.showModal();
  $("token").focus();
}

// Reads a text/event-stream body, calling onEvent(name, data) for each event.
async function readEvents(response, onEvent, isCurrent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (!isCurrent()) { reader.cancel().catch(() => {}); return; }
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let at;
    while ((at = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at).replace(/^\r?\n\r?\n/, "");
      let name = "message";
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") name = text;
        else if (field === "data") data.push(text);
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
    if (done) return;
  }
}

// --- searching ---------------------------------------------------------------------------

// Makes req the state and shows it: the controls, the URL, and (with a query) the search.
function search(req, how) {
  // how: "push" (a new history entry), "replace" (typing), "none" (from the URL itself)
  clearTimeout(state.typing);
  if (state.run) state.run.controller.abort();
  state.run = null;
  req = req || { query: "" };
  state.req = req;
  showRequest(req);
  const url = searchUrl(req) + (location.hash.startsWith("#/files/") && how === "none" ? location.hash : "");
  if (how === "push" && url !== location.pathname + location.search) history.pushState(null, "", url);
  else if (how !== "none") history.replaceState(null, "", url);
  if (!searches(req)) {
    state.parsed = null; state.matcher = null; state.described = Promise.resolve();
    clearResults(); $("intro").hidden = false; setStatus(""); return;
  }
  $("intro").hidden = true;
  const run = { id: ++state.runs, controller: new AbortController() };
  state.run = run;
  state.statuses = new Map();
  state.done = 0; state.total = 0; state.final = false;
  setProgress(0.04);
  setStatus("Searching…");
  hideProblem();
  const isCurrent = () => state.run === run;
  state.parsed = null; state.matcher = null;
  state.described = describe(req, run);
  stream(req, run, isCurrent).catch((error) => {
    if (!isCurrent() || error.name === "AbortError") return;
    showProblem({ detail: "The search failed: " + error.message });
    setStatus(""); setProgress(0);
  });
}

async function stream(req, run, isCurrent) {
  const response = await fetch("/v1/search/stream", {
    method: "POST", headers: headers(true), body: JSON.stringify({ ...PAGE_FIELDS, ...req }), signal: run.controller.signal,
  });
  if (!isCurrent()) return;
  if (response.status === 401) { setStatus(""); setProgress(0); askToken(() => search(state.req, "none")); return; }
  if (!response.ok) {
    const problem = await problemOf(response);
    if (!isCurrent()) return;
    clearResults(); showProblem(problem); setStatus(""); setProgress(0);
    return;
  }
  let first = true;
  await readEvents(response, (name, data) => {
    if (first && (name === "files" || name === "done")) { first = false; clearResults(); }
    if (name === "namespace") { state.statuses.set(data.name, data); renderFacets(); }
    else if (name === "files") { state.answer = data; renderFiles(data, false); renderFacets(); }
    else if (name === "progress") { state.done = data.done; state.total = data.total; showProgress(data); renderFacets(); }
    else if (name === "done") { finish(data); }
    else if (name === "error") { showProblem(data); setProgress(0); }
  }, isCurrent);
  if (isCurrent()) state.run = null;
}

async function describe(req, run) {
  // the one parser's account of the query: what to highlight
  try {
    const response = await fetch("/v1/query", {
      method: "POST", headers: headers(true), body: JSON.stringify(req), signal: run.controller.signal,
    });
    if (state.req !== req || !response.ok) return;  // the stream may have ended first: still this request's
    const parsed = await response.json();
    if (state.req !== req) return;
    state.parsed = parsed;
    state.matcher = matcherOf(parsed);
    if (state.answer) renderFiles(state.answer, state.final);
    renderFacets();
  } catch { /* highlighting is a nicety: the search goes on without it */ }
}

function finish(answer) {
  state.final = true;
  state.answer = answer;
  for (const status of answer.namespaces) state.statuses.set(status.name, status);
  state.done = state.total = answer.namespaces.length;
  renderFiles(answer, true);
  renderFacets();
  if (answer.files.length < answer.file_count) loadFacets(answer);
  renderNext(answer);
  markHitLines();
  const note = $("note");
  note.hidden = !answer.note;
  note.textContent = answer.note || "";
  const failed = answer.namespaces.filter((s) => s.status !== "ok").length;
  const parts = [el("b", { text: plural(answer.file_count, "file") }), ` in ${plural(answer.namespaces.length, "namespace")}`];
  if (answer.files.length < answer.file_count) {
    const from = answer.limits.offset + 1;
    parts.push(` · showing ${from.toLocaleString()}–${(answer.limits.offset + answer.files.length).toLocaleString()}`);
  }
  if (failed) parts.push(` · ${failed} did not answer fully`);
  parts.push(` · ${answer.took_ms} ms`);
  setStatus(...parts);
  setProgress(0);
}

function showProgress(progress) {
  setProgress(progress.total ? Math.max(0.04, progress.done / progress.total) : 0.04);
  setStatus("Searching… ", el("b", { text: `${progress.done} of ${progress.total}` }), " namespaces answered · ",
    plural(progress.file_count, "file") + " so far");
}

// --- highlighting --------------------------------------------------------------------------

function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\\/]/g, "\\$&"); }

function matcherOf(parsed) {
  if (!parsed || parsed.mode === "semantic" || !parsed.pattern) return null;
  let flags = "gu" + (parsed.case_sensitive ? "" : "i");
  let source = parsed.mode === "regex" ? parsed.pattern : escapeRegExp(parsed.pattern);
  if (parsed.mode === "regex") {  // RE2 -> JavaScript, where they differ and it matters
    source = source.replace(/\(\?P</g, "(?<").replace(/\\z/g, "$").replace(/\\A/g, "^");
    const lead = /^\(\?([imsU]+)\)/.exec(source);
    if (lead) {
      source = source.slice(lead[0].length);
      if (lead[1].includes("i") && !flags.includes("i")) flags += "i";
      if (lead[1].includes("s")) flags += "s";
    }
  }
  for (const f of [flags, flags.replace("u", "")]) {
    try { return new RegExp(source, f); } catch { /* try without unicode */ }
  }
  return null;
}

// Where matcher finds the pattern in text: [start, end) pairs, the first 64 at most, none empty.
function matchRanges(text, matcher) {
  const ranges = [];
  if (!matcher || !text) return ranges;
  matcher.lastIndex = 0;
  for (const match of text.matchAll(matcher)) {
    if (!match[0].length) continue;
    ranges.push([match.index, match.index + match[0].length]);
    if (ranges.length >= 64) break;
  }
  return ranges;
}

function highlighted(text, matcher) { return runsNode([["", text || ""]], matchRanges(text, matcher)); }

// Classed runs of text ([class, text], as /v1/view sends a line) with the ranges given marked:
// a match that spans runs is one <mark> holding each run's part in its own class.
function runsNode(runs, ranges) {
  const fragment = document.createDocumentFragment();
  let at = 0, r = 0, mark = null, markOf = -1;
  for (const [cls, part] of runs) {
    let from = 0;
    while (from < part.length) {
      const pos = at + from;
      while (r < ranges.length && ranges[r][1] <= pos) r++;
      const inside = r < ranges.length && ranges[r][0] <= pos;
      const end = r < ranges.length ? Math.min(part.length, (inside ? ranges[r][1] : ranges[r][0]) - at) : part.length;
      const piece = part.slice(from, end);
      const node = cls ? el("span", { class: "t-" + cls, text: piece }) : document.createTextNode(piece);
      if (inside) {
        if (markOf !== r) { mark = el("mark"); markOf = r; fragment.append(mark); }
        mark.append(node);
      } else {
        fragment.append(node);
      }
      from = end;
    }
    at += part.length;
  }
  return fragment;
}

// --- rendering results ---------------------------------------------------------------------

function clearResults() {
  state.answer = null;
  $("files").replaceChildren();
  $("next").hidden = true;
  $("next-actions").replaceChildren();
  $("note").hidden = true;
  renderFacets();
}

function fileHref(namespace, path, line) {
  const parts = path.split("/").map(encodeURIComponent).join("/");
  return `#/files/${encodeURIComponent(namespace)}/${parts}${line ? "?line=" + line : ""}`;
}

function pathNode(path) {
  const cut = path.lastIndexOf("/");
  return [el("span", { class: "dir", text: cut >= 0 ? path.slice(0, cut + 1) : "" }), el("b", { text: path.slice(cut + 1) })];
}

function lineRow(namespace, path, number, text, cls) {  // cls: "" a matched line, "ctx" context
  return el("div", { class: "line" + (cls ? " " + cls : "") },
    el("a", { class: "ln", href: fileHref(namespace, path, number), "aria-label": `line ${number}`, text: String(number) }),
    el("code", {}, cls === "ctx" ? text : highlighted(text, state.matcher)));
}

// A run of matched lines with their context, merged as rg merges them: a line shown once,
// a gap marked where the run skips lines.
function linesNode(group, entries) {
  const rows = new Map();  // line number -> [text, is context]
  for (const { line, text, context } of entries) {
    const before = (context && context.before) || [];
    const after = (context && context.after) || [];
    before.forEach((t, i) => { const n = line - before.length + i; if (!rows.has(n)) rows.set(n, [t, true]); });
    rows.set(line, [text, false]);
    after.forEach((t, i) => { const n = line + 1 + i; if (!rows.has(n)) rows.set(n, [t, true]); });
  }
  const out = [];
  let previous = 0;
  for (const n of [...rows.keys()].sort((a, b) => a - b)) {
    const [text, ctx] = rows.get(n);
    const row = lineRow(group.namespace, group.file_path, n, text, ctx ? "ctx" : "");
    if (previous && n > previous + 1) row.classList.add("after-gap");
    out.push(row);
    previous = n;
  }
  return out;
}

function hitNode(group, hit) {
  // a hit has no text of its own: its matched lines (the first ones); a semantic hit has its reason
  const lines = hit.lines && hit.lines.length ? hit.lines : [];
  if (hit.kind === "file" && !lines.length) return el("li", { class: "hit pathhit" }, el("span", { class: "kind file", text: "path" }), " the path matches");
  const why = hit.reason  // the query's words and the field or sentence they were found in
    ? [el("div", { class: "why", title: "why it matched: " + (hit.matched_terms || []).join(", "), text: hit.reason })]
    : [];
  const span = hit.end_line > hit.start_line ? `lines ${hit.start_line}–${hit.end_line}` : `line ${hit.start_line}`;
  const rest = (hit.line_count || 0) - (hit.lines ? hit.lines.length : 0);
  const more = rest > 0
    ? [el("a", { class: "more-lines", href: fileHref(group.namespace, group.file_path, hit.start_line),
        text: `${rest} more matched line${rest === 1 ? "" : "s"} in ${span}` })]
    : [];
  const score = typeof hit.score === "number"  // a search by meaning: how close, in [0, 1]
    ? [el("span", { class: "score", title: "similarity to the query", text: hit.score.toFixed(2) })]
    : [];
  // the file's own hit (its lines outside every declaration): the lines alone, under the file's header
  if (hit.kind === "file") return el("li", { class: "hit own" }, ...linesNode(group, lines), ...more);
  return el("li", { class: "hit decl" },
    el("div", { class: "decl-head" }, el("span", { class: "kind " + hit.kind, text: hit.kind }),
      el("span", { class: "qname" }, highlighted(hit.qualified_name, state.matcher)), el("span", { class: "span", text: span }), ...score),
    ...why, ...linesNode(group, lines), ...more);
}

// A file's hits in order: the file's own (its lines outside every declaration) first, then each declaration.
function hitsNode(group) {
  return el("ol", { class: "hits" }, ...group.hits.map((hit) => hitNode(group, hit)));
}

// The other copies of a group's content (SPEC §3, Duplicates): a "+N copies" toggle in its header
// and, once opened, a link to each copy's file view.
function copiesNodes(group) {
  const copies = group.duplicates || [];
  if (!copies.length) return [null, null];
  const list = el("ul", { class: "copies", hidden: true, "aria-label": "other copies of this file" },
    ...copies.map((c) => el("li", {},
      el("span", { class: "ns", title: "namespace " + c.namespace, text: c.namespace }), " ",
      el("a", { class: "path", href: fileHref(c.namespace, c.file_path), title: "Open " + c.file_path }, ...pathNode(c.file_path)))));
  const toggle = el("button", {
    type: "button", class: "copies-toggle", "aria-expanded": "false",
    title: "the same file (same bytes) in other places",
    text: copies.length === 1 ? "+1 copy" : `+${copies.length} copies`,
    onclick: () => {
      const open = list.hidden;
      list.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open));
    },
  });
  return [toggle, list];
}

function fileNode(group) {
  const count = group.hit_count === 1 ? "1 hit" : `${group.hit_count} hits`;
  const [toggle, copies] = copiesNodes(group);
  return el("article", { class: "file", "data-namespace": group.namespace, "data-path": group.file_path },
    el("header", {},
      el("span", { class: "ns", title: "namespace " + group.namespace, text: group.namespace }),
      el("a", { class: "path", href: fileHref(group.namespace, group.file_path), title: "Open " + group.file_path }, ...pathNode(group.file_path)),
      toggle,
      el("span", { class: "count", text: count })),
    copies,
    hitsNode(group));
}

function renderFiles(answer, final) {
  $("files").replaceChildren(...answer.files.map(fileNode));
  $("files").setAttribute("aria-busy", final ? "false" : "true");
}

function renderNext(answer) {
  const actions = answer.next || [];
  $("next").hidden = !actions.length;
  $("next-actions").replaceChildren(...actions.map((action, i) => el("button", {
    type: "button", class: "action" + (i === 0 && action.args.offset > answer.limits.offset ? " primary" : ""),
    text: action.reason, onclick: () => search(action.args, "push"),
  })));
}

// --- facets: namespaces (with status), languages, folders -----------------------------------

function languageOf(path) {
  const name = path.slice(path.lastIndexOf("/") + 1);
  for (const [lang, globs] of Object.entries(LANGUAGES)) {
    for (const glob of globs) {
      if (glob.startsWith("*.") ? name.endsWith(glob.slice(1)) : name === glob) return lang;
    }
  }
  return null;
}

function tokens() { return ((state.req && state.req.query) || "").split(/\s+/).filter(Boolean); }

function quoteValue(value) { return /[\s"\\]/.test(value) ? `"${value.replace(/[\\"]/g, "\\$&")}"` : value; }

function toggleFilter(token) {
  const words = tokens();
  const next = words.includes(token) ? words.filter((w) => w !== token) : [token, ...words];
  const query = next.join(" ");
  $("q").value = query;
  const req = { ...state.req, query, offset: 0 };
  delete req.cursor;
  search(req, "push");
}

function facetRow(token, label, count, extra) {
  const on = tokens().includes(token);
  return el("li", {},
    el("button", { type: "button", class: "facet" + (count === 0 ? " none" : ""), "aria-pressed": on ? "true" : "false", title: (on ? "Remove " : "Only ") + token,
      onclick: () => toggleFilter(token) }, ...(extra && extra.dot ? [extra.dot] : []),
      el("span", { class: "name", text: label }), el("span", { class: "count", text: count === null ? "" : count.toLocaleString() })),
    extra && extra.reason ? el("div", { class: "reason " + extra.tone, text: extra.reason }) : null);
}

// The facets' counts, every facet alike: over the whole answer where it is known (all its files on
// this page, or its snapshot's counts from /v1/facets), else over the files this page shows.
function facetCounts() {
  const answer = state.answer;
  if (answer && state.facets && state.facets.answer === answer) return { whole: true, ...state.facets.counts };
  const files = (answer && answer.files) || [];
  const namespaces = new Map(), languages = new Map(), folders = new Map();
  const add = (map, key) => map.set(key, (map.get(key) || 0) + 1);
  for (const group of files) {
    add(namespaces, group.namespace);
    const lang = languageOf(group.file_path);
    if (lang) add(languages, lang);
    const cut = group.file_path.indexOf("/");
    if (cut > 0) add(folders, group.file_path.slice(0, cut + 1));
  }
  const whole = Boolean(state.final && answer && files.length >= answer.file_count);
  return { whole, namespaces: whole ? namespaces : null, languages, folders };
}

// An answer with more files than its page: its facets counted over its snapshot (the cursor of its
// next page, or of the request that paged to it). Without one the facets stay "on this page".
async function loadFacets(answer) {
  const action = (answer.next || []).find((a) => a.args && a.args.cursor);
  const req = action ? action.args : state.req && state.req.cursor ? state.req : null;
  if (!req) return;
  try {
    const response = await fetch("/v1/facets", { method: "POST", headers: headers(true), body: JSON.stringify(req) });
    if (!response.ok || state.answer !== answer) return;
    const body = await response.json();
    if (state.answer !== answer) return;
    const tally = (facet) => new Map(facet.map((f) => [f.value, f.count]));
    const counts = { namespaces: tally(body.namespaces), languages: tally(body.languages), folders: tally(body.folders) };
    state.facets = { answer, counts };
    renderFacets();
  } catch { /* the facets stay counted over this page */ }
}

function renderFacets() {
  const counts = facetCounts();
  const statuses = [...state.statuses.values()].sort((a, b) => a.name.localeCompare(b.name));
  const rows = statuses.map((s) => facetRow("repo:" + s.name, s.name, counts.namespaces ? counts.namespaces.get(s.name) || 0 : s.files, {
    dot: el("span", { class: "dot " + (STATUS_CLASS[s.status] || ""), title: s.status }),
    reason: s.status === "ok" ? "" : `${s.status}${s.error ? ": " + s.error : ""}`,
    tone: s.status === "capped" || s.status === "timeout" ? "warn" : "bad",
  }));
  if (state.run && state.total > statuses.length) {
    rows.push(el("li", {}, el("div", { class: "facet", "aria-disabled": "true" }, el("span", { class: "dot pending" }),
      el("span", { class: "name", text: `${state.total - statuses.length} still searching…` }))));
  }
  $("facet-ns").replaceChildren(...rows);
  for (const scope of document.querySelectorAll(".facets .scope")) scope.hidden = counts.whole;
  const ordered = (map) => [...map.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).slice(0, 12);
  $("facet-lang").replaceChildren(...ordered(counts.languages).map(([lang, n]) => facetRow("lang:" + lang, lang, n)));
  $("facet-dir").replaceChildren(...ordered(counts.folders).map(([dir, n]) => facetRow("file:" + quoteValue(dir), dir, n)));
}

// --- the request's own settings, as chips --------------------------------------------------

function showRequest(req) {
  const input = $("q");
  if (document.activeElement !== input || input.value.trim() !== req.query.trim()) input.value = req.query;
  $("case").setAttribute("aria-pressed", req.case_sensitive === true ? "true" : "false");
  $("regex").setAttribute("aria-pressed", req.mode === "regex" ? "true" : "false");
  $("semantic").setAttribute("aria-pressed", req.mode === "semantic" ? "true" : "false");
  $("context").value = String(req.context_lines || 0);
  const chips = [];
  const chip = (label, drop) => chips.push(el("span", { class: "chip" }, label,
    el("button", { type: "button", "aria-label": "Remove " + label, title: "Remove", text: "×", onclick: () => {
      const next = { ...state.req, offset: 0 }; delete next.cursor; drop(next); search(next, "push");
    } })));
  {
    for (const ns of req.namespaces || []) chip("namespace " + ns, (r) => { r.namespaces = r.namespaces.filter((x) => x !== ns); });
    for (const path of req.paths || []) chip((path.startsWith("!") ? "not path " + path.slice(1) : "path " + path), (r) => { r.paths = r.paths.filter((x) => x !== path); });
    for (const lang of req.languages || []) chip("language " + lang, (r) => { r.languages = r.languages.filter((x) => x !== lang); });
    if (req.offset) chip(`from file ${req.offset + 1}`, () => {});
    if (req.timeout_ms && req.timeout_ms !== DEFAULTS.timeout_ms) chip(`timeout ${req.timeout_ms} ms`, (r) => { delete r.timeout_ms; });
    if (req.mode === "semantic") chip("by meaning", (r) => { r.mode = "exact"; });
    if (req.case_sensitive === false) chip("ignore case", (r) => { r.case_sensitive = null; });
  }
  $("chips").replaceChildren(...chips);
}

// --- status, problems -----------------------------------------------------------------------

function setStatus(...parts) { $("status").replaceChildren(...parts); }
function setProgress(fraction) { $("progress-bar").style.width = fraction ? `${Math.round(fraction * 100)}%` : "0"; }
function hideProblem() { $("problem").hidden = true; }
function showProblem(problem) {
  const box = $("problem");
  box.replaceChildren(problem.field ? el("code", { text: problem.field }) : "", problem.field ? ": " : "", problem.detail || problem.title || "error");
  box.hidden = false;
}

// --- the file viewer ------------------------------------------------------------------------

function viewerRoute() {
  const hash = location.hash;
  if (!hash.startsWith("#/files/")) return null;
  const [route, query] = hash.slice("#/files/".length).split("?");
  const slash = route.indexOf("/");
  if (slash < 0) return null;
  try {
    const namespace = decodeURIComponent(route.slice(0, slash));
    const path = route.slice(slash + 1).split("/").map(decodeURIComponent).join("/");
    const line = Number(new URLSearchParams(query || "").get("line")) || 0;
    return { namespace, path, line };
  } catch { return null; }
}

function fileUrl(what, route) {
  const encode = (text) => text.split("/").map(encodeURIComponent).join("/");
  return `/v1/${what}/${encode(route.namespace)}/${encode(route.path)}`;
}

// The first line of the slice holding line n: a file up to VIEW_LINES lines is one slice, the whole file.
function sliceStart(n) { return Math.floor(Math.max(0, n - 1) / VIEW_LINES) * VIEW_LINES + 1; }

// Opens the file at route: the whole file, highlighted by the gateway, or in a file past VIEW_LINES
// lines the slice holding the line chosen (or the first hit). It goes to that line, or to the file's
// first hit, with every hit marked. A slice is read VIEW_CHUNK lines at a time, the chunk holding the
// line first, then those beside it, each put in its place as it comes.
function openViewer(route) {
  const body = $("viewer-body");
  const hits = hitLinesOf(route);
  const target = route.line || (hits.size ? Math.min(...hits) : 1);
  const run = ++state.viewerRuns;
  Object.assign(state, { viewerFirst: sliceStart(target), viewerLast: 0, viewerMore: null, viewerReading: null,
    viewerAimed: false, viewerStepped: false, currentMatch: null });
  $("viewer-matches").textContent = "";
  $("viewer-meta").textContent = "";
  $("viewer-more").hidden = true;
  $("viewer-outline").hidden = true;
  body.replaceChildren(el("p", { class: "meta", text: "Loading…" }));
  $("viewer-title").replaceChildren(el("span", { class: "ns", text: route.namespace }), " ", ...pathNode(route.path));
  $("viewer").hidden = false;
  document.body.style.overflow = "hidden";
  loadOutline(route, run);  // beside the first lines: a file not indexed yet is parsed for it
  state.viewerReading = readSlice(route, run, state.viewerFirst, target);
  return state.viewerReading;
}

// Reads the slice from line `first` (VIEW_LINES lines at most), the chunk holding `target` first, then the
// chunks after and before it in turn; settles once the slice is shown.
async function readSlice(route, run, first, target) {
  const chunks = [Math.floor((Math.max(target, first) - first) / VIEW_CHUNK)];
  let count = null;  // the slice's chunks, once the first read says how long the file is
  for (let i = 0; i < chunks.length; i++) {
    const total = await readChunk(route, run, first + chunks[i] * VIEW_CHUNK);
    if (total === null) { if (run === state.viewerRuns) state.viewerReading = null; return; }  // another file, or an error
    if (count === null) {
      const last = Math.min(total, first + VIEW_LINES - 1);
      count = Math.max(1, Math.ceil((last - first + 1) / VIEW_CHUNK));
      for (let step = 1; step < count; step++) {  // after, before, after, ...
        if (chunks[0] + step < count) chunks.push(chunks[0] + step);
        if (chunks[0] - step >= 0) chunks.push(chunks[0] - step);
      }
    }
    aim(route, i === chunks.length - 1);
    countMatches();
  }
  state.viewerReading = null;
  const last = state.viewerLast, total = state.viewerTotal;
  const partial = state.viewerFirst > 1 || last < total;
  $("viewer-meta").textContent = `${plural(total, "line")}${partial ? ` · showing ${state.viewerFirst.toLocaleString()}–${last.toLocaleString()}` : ""}`;
  state.viewerMore = last < total ? () => readMore(route, run, last + 1) : null;
  const more = $("viewer-more");
  more.hidden = last >= total;
  more.onclick = state.viewerMore;
  countMatches();
}

// The next slice (past VIEW_LINES lines), once: a read in flight is shared.
function readMore(route, run, first) {
  if (run !== state.viewerRuns) return Promise.resolve();
  if (!state.viewerReading) {
    $("viewer-more").hidden = true;
    state.viewerReading = readSlice(route, run, first, first);
  }
  return state.viewerReading;
}

// Reads VIEW_CHUNK lines from `first` and puts them in their place; the file's length, or null.
async function readChunk(route, run, first) {
  const body = $("viewer-body");
  const response = await fetch(fileUrl("view", route) + `?start_line=${first}&lines=${VIEW_CHUNK}`, { headers: headers(false) });
  if (run !== state.viewerRuns) return null;  // another file was opened meanwhile
  if (response.status === 401) { askToken(() => { if (run === state.viewerRuns) openViewer(route); }); return null; }
  if (!response.ok) {
    const problem = await problemOf(response);
    if (run === state.viewerRuns) body.replaceChildren(el("p", { class: "problem", text: problem.detail || "The file could not be read." }));
    return null;
  }
  const slice = await response.json();
  await state.described;  // the matches are marked with the search's own pattern
  if (run !== state.viewerRuns) return null;
  const hits = hitLinesOf(route);
  const rows = slice.lines.map((line, i) => codeRow(route, first + i, line, hits));
  if (!body.querySelector(".line")) body.replaceChildren();
  const after = [...body.children].find((row) => Number(row.id.slice(1)) > first);  // rows are in line order
  if (after) after.before(...rows); else body.append(...rows);
  state.viewerLast = Math.max(state.viewerLast, slice.end_line);
  state.viewerTotal = slice.total_lines;
  return slice.total_lines;
}

// Goes to the line the view was opened at, or to its first hit, once that is read (or all is).
function aim(route, all) {
  const body = $("viewer-body");
  const row = route.line ? document.getElementById("L" + route.line) : null;
  if (!state.viewerAimed) {
    const ready = route.line ? row : matchTargets().length || all;
    if (!ready) return;
    state.viewerAimed = true;
    chooseMatch(route.line);
    const target = row || state.currentMatch;
    if (target) target.scrollIntoView({ block: "center" });
    body.focus({ preventScroll: true });
  } else if (!state.viewerStepped && state.currentMatch) {
    const was = state.currentMatch;
    chooseMatch(route.line);  // lines read since may hold a match nearer the line (or before the first seen)
    if (!route.line && state.currentMatch !== was) state.currentMatch.scrollIntoView({ block: "center" });
  }
}

function lineOf(node) { return Number(node.closest(".line").id.slice(1)); }

// The answer's hit lines on the rows shown (the answer may settle after the file was opened).
function markHitLines() {
  const route = viewerRoute();
  if (!route || $("viewer").hidden) return;
  const hits = hitLinesOf(route);
  for (const row of $("viewer-body").querySelectorAll(".line")) row.classList.toggle("hit", hits.has(Number(row.id.slice(1))));
  if (!state.currentMatch && state.viewerAimed) chooseMatch(route.line);
  countMatches();
}

function codeRow(route, n, line, hitLines) {
  const runs = typeof line === "string" ? [["", line]] : line.map((run) => [run.kind, run.text]);
  const text = runs.map((run) => run[1]).join("");
  return el("div", { class: "line" + (hitLines.has(n) ? " hit" : "") + (n === route.line ? " chosen" : ""), id: "L" + n },
    el("a", { class: "ln", href: fileHref(route.namespace, route.path, n), "aria-label": `line ${n}`, text: String(n) }),
    el("code", {}, runsNode(runs, matchRanges(text, state.matcher))));
}

async function loadOutline(route, run) {
  try {
    const response = await fetch(fileUrl("outline", route), { headers: headers(false) });
    if (!response.ok || run !== state.viewerRuns) return;
    const body = await response.json();
    if (run === state.viewerRuns) renderOutline(route, body.outline);
  } catch { /* the file is shown without its outline */ }
}

// The file's declarations (from the gateway's index), each a link to its first line.
function renderOutline(route, symbols) {
  const items = symbols.map((s) => el("li", {},
    el("a", { class: "sym depth-" + Math.min(s.depth, 5), href: fileHref(route.namespace, route.path, s.start_line),
      title: `${s.qualified_name} · lines ${s.start_line}–${s.end_line}` },
      el("span", { class: "kind " + s.kind, text: s.kind }), el("span", { class: "sym-name", text: s.name }))));
  $("outline-list").replaceChildren(...items);
  $("outline-count").textContent = String(symbols.length);
  $("viewer-outline").hidden = !symbols.length;
}

// --- n / N: the next and previous match in the file view -----------------------------------

// What n and N step through: the marked matches, or (a search by meaning, a file opened alone) the hit lines.
function matchTargets() {
  const body = $("viewer-body");
  const marks = body.querySelectorAll("mark");
  return [...(marks.length ? marks : body.querySelectorAll(".line.hit"))];
}

// "3 of 14": the match n / N stand on, of the file's (a "+" where slices are left unread).
function countMatches() {
  const targets = matchTargets();
  const at = state.currentMatch ? targets.indexOf(state.currentMatch) : -1;
  const more = state.viewerMore || state.viewerReading ? "+" : "";
  const counter = $("viewer-matches");
  counter.textContent = !targets.length ? "" :
    at < 0 ? `${targets.length}${more} matches · n / N` : `${at + 1} of ${targets.length}${more}`;
  counter.title = targets.length ? "n: next match, N: previous" : "";
}

// Makes the first match on or after line (the first of all without one) the one n / N stand on.
function chooseMatch(line) {
  const targets = matchTargets();
  if (!targets.length) return;
  const at = line ? targets.findIndex((t) => lineOf(t) >= line) : 0;
  if (state.currentMatch) state.currentMatch.classList.remove("current");
  state.currentMatch = targets[at < 0 ? targets.length - 1 : at];
  state.currentMatch.classList.add("current");
}

async function stepMatch(direction) {
  let targets = matchTargets();
  let at = state.currentMatch ? targets.indexOf(state.currentMatch) : -1;
  if (at < 0) {  // none chosen yet: from the line chosen (or the top) on
    const line = (viewerRoute() || {}).line || 0;
    at = direction > 0 ? targets.findIndex((t) => lineOf(t) >= line) - 1 : targets.findIndex((t) => lineOf(t) > line);
    if (at < -1) at = direction > 0 ? targets.length - 1 : targets.length;
    if (direction < 0 && at < 0) at = targets.length;
  }
  const next = at + direction;
  state.viewerStepped = true;
  if ((next >= targets.length || next < 0) && state.viewerReading) {  // the slice is still coming: wait for it
    await state.viewerReading;
    targets = matchTargets();
  }
  while (next >= targets.length && state.viewerMore) {  // past the lines read: read on to the next match
    const held = state.viewerLast;
    await state.viewerMore();
    if (state.viewerLast === held) break;  // the read failed: no further
    targets = matchTargets();
  }
  if (!targets.length) return;
  if (state.currentMatch) state.currentMatch.classList.remove("current");
  state.currentMatch = targets[(next + targets.length) % targets.length];
  state.currentMatch.classList.add("current");
  state.currentMatch.scrollIntoView({ block: "center" });
  countMatches();
}

function hitLinesOf(route) {
  const lines = new Set();
  const group = state.answer && state.answer.files.find((g) => g.namespace === route.namespace && g.file_path === route.path);
  for (const hit of (group && group.hits) || []) {
    if (hit.lines && hit.lines.length) for (const l of hit.lines) lines.add(l.line);
    else if (hit.kind !== "file") lines.add(hit.start_line);  // (a path match has no line)
  }
  return lines;
}

function closeViewer() {
  if (state.viewerPushed) { state.viewerPushed = false; history.back(); return; }
  history.replaceState(null, "", location.pathname + location.search);
  showViewer();
}

function showViewer() {
  const route = viewerRoute();
  if (!route) {
    const wasOpen = !$("viewer").hidden;
    $("viewer").hidden = true;
    document.body.style.overflow = "";
    if (wasOpen) $("q").focus({ preventScroll: true });
    return;
  }
  const shown = $("viewer").dataset.route;
  const key = route.namespace + "\u0000" + route.path;
  const loaded = route.line ? document.getElementById("L" + route.line) : null;
  if (shown === key && !$("viewer").hidden && (loaded || !route.line)) {  // the same file: the chosen line moved
    for (const row of $("viewer-body").querySelectorAll(".line.chosen")) row.classList.remove("chosen");
    if (loaded) { loaded.classList.add("chosen"); loaded.scrollIntoView({ block: "center" }); }
    chooseMatch(route.line);
    countMatches();
    return;
  }
  $("viewer").dataset.route = key;
  openViewer(route);
}

// --- wiring ---------------------------------------------------------------------------------

// Whether keys typed at node are text: an input that takes text, a textarea, a select, an editable node.
function textField(node) {
  if (node instanceof HTMLTextAreaElement || node instanceof HTMLSelectElement) return true;
  if (node instanceof HTMLInputElement) return !["button", "checkbox", "radio", "submit", "reset", "range", "color", "file"].includes(node.type);
  return Boolean(node && node.isContentEditable);
}

// The state with the box's text and change(req) applied: a new search from its first page.
function changed(change) {
  const req = { ...state.req, query: $("q").value, offset: 0 };
  delete req.cursor;
  if (change) change(req);
  return req;
}

function fromLocation() {
  const req = requestFromParams(new URLSearchParams(location.search));
  const same = JSON.stringify(req) === JSON.stringify(state.req);
  if (!same || (searches(req) && !state.answer)) search(req, "none");
  showViewer();
}

// The namespaces this caller may search (for the welcome line); false when a token is wanted.
async function loadNamespaces() {
  const response = await fetch("/v1/namespaces", { headers: headers(false) });
  if (response.status === 401) return false;
  if (response.ok) {
    state.namespaces = (await response.json()).namespaces || [];
    $("intro-count").textContent = `${plural(state.namespaces.length, "namespace")} to search.`;
  }
  return true;
}

// With no search to run, learn at once whether this gateway wants a token.
async function welcome() {
  if (await loadNamespaces()) showViewer();
  else askToken(welcome);
}

function start() {
  const input = $("q");
  input.addEventListener("input", () => {
    clearTimeout(state.typing);
    state.typing = setTimeout(() => search(changed(), "replace"), TYPING_DELAY_MS);
  });
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    search(changed(), "push");
  });
  // Each toggle changes the state (with the box's text as it is) and the rest follows from it.
  $("case").addEventListener("click", () => search(changed((r) => { r.case_sensitive = r.case_sensitive === true ? null : true; }), "push"));
  $("regex").addEventListener("click", () => search(changed((r) => { r.mode = r.mode === "regex" ? "exact" : "regex"; }), "push"));
  $("semantic").addEventListener("click", () => search(changed((r) => { r.mode = r.mode === "semantic" ? "exact" : "semantic"; }), "push"));
  $("context").addEventListener("change", () => search(changed((r) => { r.context_lines = Number($("context").value); }), "push"));
  $("help-toggle").addEventListener("click", () => {
    const help = $("help");
    help.hidden = !help.hidden;
    $("help-toggle").setAttribute("aria-expanded", help.hidden ? "false" : "true");
  });
  for (const example of document.querySelectorAll(".example")) {
    example.addEventListener("click", () => { input.value = example.textContent; search(changed(), "push"); });
  }
  $("home").addEventListener("click", (event) => { event.preventDefault(); input.value = ""; search({ query: "" }, "push"); input.focus(); });
  $("viewer-close").addEventListener("click", closeViewer);
  $("files").addEventListener("click", (event) => {
    const link = event.target.closest("a[href^='#/files/']");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button) return;
    event.preventDefault();
    history.pushState(null, "", location.pathname + location.search + link.getAttribute("href"));
    state.viewerPushed = true;
    showViewer();
  });
  const moveTo = (event) => {
    const link = event.target.closest("a.ln, a.sym");
    if (!link) return;
    event.preventDefault();
    history.replaceState(null, "", location.pathname + location.search + link.getAttribute("href"));
    showViewer();
  };
  $("viewer-body").addEventListener("click", moveTo);
  $("viewer-outline").addEventListener("click", moveTo);
  $("token-form").addEventListener("submit", (event) => {
    const token = $("token").value.trim();
    if (!token) { event.preventDefault(); return; }
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token").value = "";
    const retry = state.retry;
    state.retry = null;
    if (retry) setTimeout(retry, 0);
  });
  // Keys as on GitHub and Sourcegraph: / goes to the box unless one is typing in a field
  // (there it is a slash), Escape leaves the box (after stopping a search in flight).
  document.addEventListener("keydown", (event) => {
    const inField = textField(event.target);
    if (event.key === "/" && !inField && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault();
      if (!$("viewer").hidden) closeViewer();
      input.focus(); input.select();
    } else if ((event.key === "n" || event.key === "N") && !inField && !event.ctrlKey && !event.metaKey && !event.altKey
        && !$("viewer").hidden) {
      event.preventDefault();
      stepMatch(event.key === "n" ? 1 : -1);
    } else if (event.key === "Escape") {
      if ($("token-dialog").open) return;
      if (!$("viewer").hidden) { event.preventDefault(); closeViewer(); }
      else if (!$("help").hidden) { $("help").hidden = true; $("help-toggle").setAttribute("aria-expanded", "false"); }
      else if (event.target === input) {
        if (state.run) { state.run.controller.abort(); state.run = null; setStatus("Stopped."); setProgress(0); }
        event.preventDefault();  // a search box's own Escape would empty it: the query stays
        input.blur();
      }
    }
  });
  window.addEventListener("popstate", () => { state.viewerPushed = false; fromLocation(); });
  if (searches(requestFromParams(new URLSearchParams(location.search)))) {
    loadNamespaces().catch(() => {});  // beside the search, not before it
    fromLocation();
  } else {
    search(requestFromParams(new URLSearchParams(location.search)), "none");  // toggles kept in the URL
    welcome().catch(() => {});
  }
  if (!location.hash.startsWith("#/files/")) input.focus();
}

start();
