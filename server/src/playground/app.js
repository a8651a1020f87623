// The toolgate playground. Everything it shows comes from this server's POST /v1/playground:
// the page holds no engine and no state beyond its editors.
"use strict";

const SOURCE_NAME = "playground.gate";

const EXAMPLE_POLICY = `module demo

write  send_email
ingest fetch_page
read   search

stage main { tools [search, fetch_page, send_email] }

latch untrusted_content {
  set_by ingest
  blocks write
}

rule no_cc for send_email {
  require not args.cc exists
}
`;

const EXAMPLE_REQUEST = `{
  "facts": { "stage": "main" },
  "calls": [
    { "id": "c1", "tool": "search", "args": { "q": "opening hours" } },
    { "id": "c2", "tool": "send_email", "args": { "to": "a@example.com", "cc": "b@example.com" } }
  ]
}
`;

const $ = (id) => document.getElementById(id);
let sequence = 0;
let timer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const token = $("token").value.trim();
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

function setStatus(text, cls) {
  const s = $("status");
  s.textContent = text;
  s.className = cls || "";
}

// A one-based line and column (in characters) of `text` as a string index.
function indexOf(text, line, col) {
  const lines = text.split("\n");
  let at = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i++) at += lines[i].length + 1;
  const own = lines[Math.min(line, lines.length) - 1] || "";
  return at + Array.from(own).slice(0, Math.max(col - 1, 0)).join("").length;
}

function escapeHtml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

// Draws each diagnostic's span behind the policy editor.
function highlight(diagnostics) {
  const text = $("policy").value;
  const spans = diagnostics
    .filter((d) => d.file === SOURCE_NAME)
    .map((d) => {
      const start = indexOf(text, d.line, d.col);
      let end = indexOf(text, d.end_line, d.end_col);
      if (end <= start) end = start + 1;
      return { start, end, cls: d.severity };
    })
    .sort((a, b) => a.start - b.start);
  let html = "";
  let at = 0;
  for (const s of spans) {
    if (s.start < at) continue;
    html += escapeHtml(text.slice(at, s.start));
    const inner = text.slice(s.start, Math.min(s.end, text.length));
    // A span at a line's end or the text's end still shows: mark a space there.
    const shown = inner === "" || inner === "\n" ? " " + inner : inner;
    html += `<mark class="${s.cls}">${escapeHtml(shown)}</mark>`;
    at = Math.min(s.end, text.length);
  }
  html += escapeHtml(text.slice(at)) + "\n ";
  $("policy-marks").innerHTML = html;
  syncScroll();
}

function syncScroll() {
  $("policy-marks").scrollTop = $("policy").scrollTop;
  $("policy-marks").scrollLeft = $("policy").scrollLeft;
}

function select(d) {
  const text = $("policy").value;
  const start = indexOf(text, d.line, d.col);
  const end = Math.max(indexOf(text, d.end_line, d.end_col), start + 1);
  const area = $("policy");
  area.focus();
  area.setSelectionRange(start, end);
}

function showDiagnostics(list) {
  const ul = $("diagnostics");
  ul.replaceChildren();
  if (!list.length) {
    ul.append(el("li", { class: "none" }, "none"));
  }
  for (const d of list) {
    const where = d.file === SOURCE_NAME ? `${d.line}:${d.col}` : d.location;
    const li = el(
      "li",
      { class: d.severity, title: d.rendered },
      el("span", { class: "where" }, where),
      el("strong", {}, d.severity + ": "),
      d.message,
      d.help ? el("span", { class: "help" }, "help: " + d.help) : null
    );
    if (d.file === SOURCE_NAME) li.addEventListener("click", () => select(d));
    ul.append(li);
  }
  highlight(list);
}

// A decision in one word: allow, ask (it runs once a person approves exactly this call) or
// deny; the server's own words (toolgate_server::decision_word).
function outcome(d) {
  return d.allow ? "allow" : d.kind === "ask" ? "ask" : "deny";
}

// Approves exactly the call that asked, as a person would: its digest goes into the
// request's `facts.approvals`, and the request runs again.
function approve(digest) {
  let request;
  try {
    request = JSON.parse($("request").value);
  } catch (e) {
    return;
  }
  if (request === null || typeof request !== "object") return;
  request.facts = request.facts && typeof request.facts === "object" ? request.facts : {};
  const given = Array.isArray(request.facts.approvals) ? request.facts.approvals : [];
  if (!given.includes(digest)) given.push(digest);
  request.facts.approvals = given;
  $("request").value = JSON.stringify(request, null, 2) + "\n";
  run();
}

function showDecisions(response) {
  const body = $("decisions").tBodies[0];
  body.replaceChildren();
  for (const d of response ? response.decisions : []) {
    const word = outcome(d);
    const asks = word === "ask" && d.approval;
    const button = asks ? el("button", { type: "button", class: "approve", title: d.approval }, "approve") : null;
    if (button) button.addEventListener("click", () => approve(d.approval));
    body.append(
      el(
        "tr",
        {},
        el("td", {}, d.id),
        el("td", {}, d.tool),
        el("td", { class: word }, word),
        el("td", {}, d.kind || (d.allow && d.approval ? "approved" : "")),
        el("td", {}, d.rule || ""),
        el("td", { class: "refusal" }, d.reason || "", button)
      )
    );
  }
}

function showExplain(explain) {
  const out = $("explain");
  out.replaceChildren();
  for (const call of explain || []) {
    const d = call.decision;
    const ol = el("ol");
    for (const s of call.steps) {
      ol.append(
        el(
          "li",
          { class: s.passed ? "passed" : "failed" },
          el("span", { class: "check" }, s.check),
          (s.passed ? "passed: " : "failed: ") + s.detail
        )
      );
    }
    out.append(
      el("div", { class: "call" }, el("strong", {}, `${d.id} ${d.tool}: ${outcome(d)}`), ol)
    );
  }
}

function showOffer(offer, error) {
  const out = $("offer");
  out.replaceChildren();
  if (error) {
    out.append(el("div", { class: "error" }, "tools: " + error.message));
    return;
  }
  if (!offer) return;
  out.append(el("div", {}, `stage ${offer.stage === null || offer.stage === undefined ? "(none)" : offer.stage}: ${offer.tools.length} offered`));
  const offered = el("ul", { id: "offered" });
  for (const t of offer.tools) {
    offered.append(el("li", {}, el("strong", {}, t.name), t.description ? el("span", { class: "desc" }, " " + t.description) : null));
  }
  out.append(offered);
  if (offer.disabled.length) {
    out.append(el("div", {}, "disabled by a latch this turn:"));
    const ul = el("ul");
    for (const t of offer.disabled) ul.append(el("li", {}, `${t.name} (latch ${t.latch})`));
    out.append(ul);
  }
  if (offer.withheld.length) {
    out.append(el("div", {}, "withheld:"));
    const ul = el("ul", { id: "withheld" });
    for (const t of offer.withheld) ul.append(el("li", {}, el("strong", {}, t.name), ` (${t.reason}): ${t.detail}`));
    out.append(ul);
  }
}

function showRequestError(error) {
  const box = $("request-error");
  box.hidden = !error;
  box.textContent = error ? `request: ${error.message}${error.location ? " (at " + error.location + ")" : ""}` : "";
}

async function run() {
  const mine = ++sequence;
  setStatus("running…");
  let answer;
  try {
    const resp = await fetch("/v1/playground", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({
        source: $("policy").value,
        request: $("request").value,
        tools: $("tools").value,
      }),
    });
    answer = await resp.json();
    if (!resp.ok) throw new Error(answer.error ? answer.error.message : resp.statusText);
  } catch (e) {
    if (mine === sequence) setStatus("the server refused: " + e.message, "bad");
    return;
  }
  if (mine !== sequence) return; // an older answer arriving late
  showDiagnostics(answer.diagnostics);
  showRequestError(answer.request_error);
  showDecisions(answer.response);
  showExplain(answer.explain);
  showOffer(answer.offer, answer.tools_error);
  if (!answer.ok) {
    const errors = answer.diagnostics.filter((d) => d.severity === "error").length;
    setStatus(`does not compile: ${errors} error${errors === 1 ? "" : "s"}`, "bad");
  } else {
    setStatus(`module ${answer.module}, revision ${answer.revision}`, "ok");
  }
}

function soon() {
  clearTimeout(timer);
  timer = setTimeout(run, 300);
}

// Puts a policy's own text in the editor, true when it did: a loaded module's
// (`?policy=MODULE`), or the file `toolgate playground FILE` serves (`?file`, null module).
async function loadSource(module) {
  const url = module === null ? "/v1/playground/file" : "/v1/policies/" + encodeURIComponent(module) + "/source";
  const what = module === null ? "the policy file" : module;
  try {
    const resp = await fetch(url, { headers: headers() });
    const body = await resp.json();
    if (!resp.ok) {
      setStatus("cannot open " + what + ": " + body.error.message, "bad");
      return false;
    }
    $("policy").value = body.source;
    $("request").value = `{\n  "facts": { "stage": "" },\n  "calls": [\n    { "id": "c1", "tool": "", "args": {} }\n  ]\n}\n`;
    return true;
  } catch (e) {
    setStatus("cannot open " + what + ": " + e.message, "bad");
    return false;
  }
}

async function start() {
  const params = new URLSearchParams(location.search);
  const module = params.get("policy");
  const wanted = module !== null || params.has("file");
  $("policy").value = EXAMPLE_POLICY;
  $("request").value = EXAMPLE_REQUEST;
  let opened = !wanted || (await loadSource(module));
  for (const id of ["policy", "request", "tools"]) $(id).addEventListener("input", soon);
  $("policy").addEventListener("scroll", syncScroll);
  $("run").addEventListener("click", run);
  // With --admin-token the source can be read only once the token is typed in.
  $("token").addEventListener("change", async () => {
    if (!opened) opened = await loadSource(module);
    await run();
  });
  highlight([]);
  if (opened) await run();
}

document.addEventListener("DOMContentLoaded", start);
