// Drives the playground page in a real browser (Debian's chromium through playwright-core):
// edits the policy into one that does not compile and sees the diagnostic highlighted, fixes
// it and sees the decisions with their refusal texts, the explain trace and the offer, saves
// a screenshot, then approves a call the policy asks about. Any failure exits non-zero with
// the reason.
//
//   node playground.mjs BASE_URL SCREENSHOT_PATH
//
// CHROMIUM overrides the browser path (default /usr/bin/chromium, Debian's package).
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";

const [base, screenshot] = process.argv.slice(2);
assert.ok(base && screenshot, "usage: node playground.mjs BASE_URL SCREENSHOT_PATH");

const BROKEN = `module demo

write  send_email
read   search

stage main { tools [search, send_email, serch] }

rule no_cc for send_email {
  require not args.cc exists
}
`;

const FIXED = BROKEN.replace("send_email, serch]", "send_email]");

// Mail to the boss asks a person first; other mail does not.
const ASKS = `module demo

write  send_email
read   search

stage main { tools [search, send_email] }

rule careful for send_email {
  ask when args.to == "boss@example.com"
}
`;

const ASK_REQUEST = `{
  "facts": { "stage": "main" },
  "calls": [
    { "id": "c1", "tool": "send_email", "args": { "to": "boss@example.com" } },
    { "id": "c2", "tool": "send_email", "args": { "to": "a@example.com" } }
  ]
}`;

const REQUEST = `{
  "facts": { "stage": "main" },
  "calls": [
    { "id": "c1", "tool": "search", "args": { "q": "opening hours" } },
    { "id": "c2", "tool": "send_email", "args": { "to": "a@example.com", "cc": "b@example.com" } }
  ]
}`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
const problems = [];
const foreign = [];
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push("console error: " + m.text());
  });
  // Every asset and every call must come from the server itself: no CDN, no other host.
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`);
  });
  page.on("request", (r) => {
    if (!r.url().startsWith(base + "/")) foreign.push(r.url());
  });

  await page.goto(base + "/playground", { waitUntil: "load" });
  // The built-in example runs on load.
  await page.locator("#status.ok").waitFor({ timeout: 15000 });

  // 1. A policy that does not compile: the diagnostic is listed and its span highlighted.
  await page.fill("#request", REQUEST);
  await page.fill("#policy", BROKEN);
  await page.locator("#status.bad", { hasText: "does not compile" }).waitFor({ timeout: 15000 });
  const diagnostic = page.locator("#diagnostics li.error").first();
  await diagnostic.waitFor();
  const text = await diagnostic.innerText();
  assert.match(text, /serch/, "the diagnostic names the unknown tool: " + text);
  assert.match(text, /^6:\d+/, "the diagnostic gives its line: " + text);
  const marked = await page.locator("#policy-marks mark.error").allInnerTexts();
  assert.ok(marked.includes("serch"), "the unknown tool is highlighted: " + JSON.stringify(marked));
  assert.equal(await page.locator("#decisions tbody tr").count(), 0, "no decisions from a broken policy");
  // Clicking the diagnostic selects its span in the editor.
  await diagnostic.click();
  const selected = await page.$eval("#policy", (t) => t.value.slice(t.selectionStart, t.selectionEnd));
  assert.equal(selected, "serch");

  // 2. Fixed: the decisions, with the refusal text, the explain trace and the offer.
  await page.fill("#policy", FIXED);
  await page.locator("#status.ok", { hasText: "module demo" }).waitFor({ timeout: 15000 });
  const rows = page.locator("#decisions tbody tr");
  await rows.nth(1).waitFor();
  assert.equal(await rows.count(), 2);
  assert.equal(await rows.nth(0).locator("td").nth(2).innerText(), "allow");
  assert.equal(await rows.nth(1).locator("td").nth(2).innerText(), "deny");
  const refusal = await rows.nth(1).locator("td.refusal").innerText();
  assert.match(refusal, /args\.cc/, "the refusal names the failed requirement: " + refusal);
  assert.match(await page.locator("#diagnostics").innerText(), /none/);
  assert.equal(await page.locator("#policy-marks mark").count(), 0, "no highlight once fixed");
  const explain = await page.locator("#explain").innerText();
  assert.match(explain, /c2 send_email: deny/);
  assert.match(explain, /rule no_cc/);
  const offered = await page.locator("#offered li").allInnerTexts();
  assert.deepEqual(offered.map((t) => t.split(" ")[0]).sort(), ["search", "send_email"]);

  // 3. A request mistake is reported with its place, and the policy still shows.
  await page.fill("#request", REQUEST.replace('"main" }', '"main" ,}'));
  await page.locator("#request-error:not([hidden])").waitFor({ timeout: 15000 });
  assert.match(await page.locator("#request-error").innerText(), /line 2/);
  await page.fill("#request", REQUEST);
  await page.locator("#request-error[hidden]").waitFor({ state: "attached", timeout: 15000 });
  await rows.nth(1).waitFor();

  mkdirSync(dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot, fullPage: true });

  // 4. A call the policy asks about shows as "ask" with an approve button; approving adds its
  // digest to the request's facts.approvals, and exactly that call is then allowed.
  await page.fill("#policy", ASKS);
  await page.fill("#request", ASK_REQUEST);
  await page.locator("#status.ok", { hasText: "module demo" }).waitFor({ timeout: 15000 });
  await page.locator("#decisions td.ask").waitFor({ timeout: 15000 });
  assert.equal(await rows.count(), 2);
  assert.equal(await rows.nth(0).locator("td").nth(2).innerText(), "ask");
  assert.equal(await rows.nth(1).locator("td").nth(2).innerText(), "allow");
  assert.match(await rows.nth(0).locator("td.refusal").innerText(), /Approval needed/);
  assert.match(await page.locator("#explain").innerText(), /c1 send_email: ask/);
  await rows.nth(0).locator("button.approve").click();
  await page.locator("#decisions td.ask").waitFor({ state: "detached", timeout: 15000 });
  assert.equal(await rows.nth(0).locator("td").nth(2).innerText(), "allow");
  assert.equal(await rows.nth(0).locator("td").nth(3).innerText(), "approved");
  const approved = JSON.parse(await page.$eval("#request", (t) => t.value));
  assert.equal(approved.facts.approvals.length, 1);
  assert.match(approved.facts.approvals[0], /^ap1:[0-9a-f]{64}$/);

  // 5. `?policy=MODULE` opens a loaded policy's own text (the server serves module `gate`).
  const other = await browser.newPage();
  other.on("pageerror", (e) => problems.push("page error: " + e.message));
  await other.goto(base + "/playground?policy=gate", { waitUntil: "load" });
  await other.locator("#status.ok", { hasText: "module gate" }).waitFor({ timeout: 15000 });
  assert.match(await other.$eval("#policy", (t) => t.value), /^module gate\n/);
} finally {
  await browser.close();
}
assert.deepEqual(foreign, [], "requests beyond the server");
assert.deepEqual(problems, [], "errors in the page");
console.log("playground: ok; screenshot at " + screenshot);
