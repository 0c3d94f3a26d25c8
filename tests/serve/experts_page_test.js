#!/usr/bin/env node
// The explorer's routing view (src/serve/experts_view.html) in Debian's headless chromium via puppeteer-core: on the
// Mixtral fixture (2 layers, 8 experts, top 2), a lens cell's click shows the experts the router chose for that
// token at the row's layer — k of them, weights summing to 1 (Mixtral renormalises the top k), the same experts and
// weights as POST /api/experts for that position, each one's direct logit attribution as POST /api/attribute's
// expert part — and the layer's load (summing to k); the layer control switches layers. On gpt2-tiny (dense) the
// panel stays hidden and no experts request is made. No page error on either.
//
//   node tests/serve/experts_page_test.js build/vocablens tests/fixtures/families/mixtral ../shared/fixtures/gpt2-tiny build/serve
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

const [cli, moe, dense, outDir] = process.argv.slice(2);
const PROMPT = "the cat sat on the mat";
const { check, failed, startServer } = require("./page_support");

async function post(server, route, body) {
  const r = await fetch(server.url + route.slice(1), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return r.json();
}

// A page on `server` with the prompt typed in its URL, once the heatmap is drawn; its errors and requests recorded.
async function openPage(browser, server) {
  const page = await browser.newPage();
  const w = watch(page);
  await page.goto(server.url + "#prompt=" + encodeURIComponent(PROMPT), { waitUntil: "load" });
  await page.waitForSelector("#heatmap td.cell", { timeout: 120000 });
  return { page, w };
}

function watch(page) {
  const errors = [], routes = [];
  page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  page.on("request", (r) => routes.push(new URL(r.url()).pathname));
  return { errors, routes };
}

// The routing table as the page shows it, once it is there for `layer`.
async function routingOf(page, layer) {
  await page.waitForFunction((L) => document.querySelector("#routing-what") && document.querySelector("#routing-what").textContent.includes(`layer ${L}:`) &&
                                     document.querySelectorAll("#routing-table tr[data-expert]").length > 0, { timeout: 120000 }, layer);
  return page.$$eval("#routing-table tr[data-expert]", (rows) => rows.map((r) => ({
    expert: +r.dataset.expert, weight: +r.dataset.weight, logit: r.dataset.logit === undefined ? null : +r.dataset.logit })));
}

// What the API says for (layer, position): the chosen experts by slot and their weights; each one's attribution.
async function apiRouting(server, layer, t, target) {
  const ex = await post(server, "/api/experts", { prompt: PROMPT, layers: String(layer), top_k: 1, top_routed: 1 });
  const pt = ex.tables.find((x) => x.name === "per_token"), c = (n) => pt.columns.indexOf(n);
  const chosen = pt.rows.filter((r) => r[c("position")] === t && r[c("direction")] === "top" && r[c("layer")] === layer)
    .sort((a, b) => a[c("slot")] - b[c("slot")]).map((r) => ({ expert: r[c("expert")], weight: r[c("weight")] }));
  const at = await post(server, "/api/attribute", { prompt: PROMPT, target: target, position: t, layer: layer + 1 });
  const comps = at.tables.find((x) => x.name === "components"), d = (n) => comps.columns.indexOf(n);
  const dla = {};
  for (const r of comps.rows) if (r[d("kind")] === "expert" && r[d("layer")] === layer) dla[r[d("expert")]] = r[d("value")];
  return { chosen, dla, load: ex.arrays.load.data[0], k: ex.summary.k };
}

async function moePage(browser) {
  const server = await startServer(cli, moe, []);
  try {
    const { page, w } = await openPage(browser, server);
    const info = await (await fetch(server.url + "api/model")).json();
    check(info.experts && info.experts.n_experts === 8 && info.experts.k === 2, "GET /api/model names the router: 8 experts, top 2");
    // The top row (the last block's output) at position 3: block 1's routing.
    const t = 3, rows = await page.$$eval("#heatmap tbody tr", (r) => r.length);
    await page.click(`#heatmap td.cell[data-layer="${rows - 1}"][data-pos="${t}"]`);
    const shown = await routingOf(page, 1);
    check(await page.$eval("#routing-wrap", (e) => !e.hidden && e.offsetHeight > 0), "an MoE cell's click shows the routing panel");
    check(await page.$eval("#routing-layer", (e) => e.value) === "1", "the last row's cell opens block 1's routing");
    const target = await page.$eval("#topk-table tr:nth-child(2) td.tok", (e) => e.textContent);
    const targetId = await page.evaluate(() => arr(lens, "top_ids")[lens.summary.layers.length - 1][3][0]);
    check(target.length > 0, "the cell's top token is listed");
    check(shown.length === 2, `k = 2 experts listed (got ${shown.length})`);
    check(Math.abs(shown.reduce((s, x) => s + x.weight, 0) - 1) < 1e-6, "their weights sum to 1 (Mixtral renormalises the top k)");
    const want = await apiRouting(server, 1, t, targetId);
    check(JSON.stringify(shown.map((x) => x.expert)) === JSON.stringify(want.chosen.map((x) => x.expert)) &&
          shown.every((x, i) => Math.abs(x.weight - want.chosen[i].weight) < 1e-12),
          `the experts and weights are POST /api/experts's for position ${t} (${JSON.stringify(want.chosen)})`);
    check(shown.every((x) => x.logit !== null && Math.abs(x.logit - want.dla[x.expert]) < 1e-9) && shown.some((x) => Math.abs(x.logit) > 0),
          "each expert's logit is POST /api/attribute's part for it");
    const load = await page.$$eval("#routing-load tr[data-expert]", (r) => r.map((x) => +x.children[1].textContent));
    check(load.length === 8 && Math.abs(load.reduce((s, v) => s + v, 0) - 2) < 0.01, `the layer's load: 8 experts summing to k = 2 (${load})`);
    check(await page.$$eval("#routing-load td.chosen", (r) => r.map((x) => +x.textContent.slice(1)).sort().join()) ===
          shown.map((x) => x.expert).sort().join(), "the chosen experts are marked in the load");
    // The layer control: block 0's routing at the same position.
    await page.select("#routing-layer", "0");
    const l0 = await routingOf(page, 0), want0 = await apiRouting(server, 0, t, targetId);
    check(JSON.stringify(l0.map((x) => x.expert)) === JSON.stringify(want0.chosen.map((x) => x.expert)) &&
          l0.every((x, i) => Math.abs(x.weight - want0.chosen[i].weight) < 1e-12),
          "the layer control shows block 0's routing, as POST /api/experts");
    fs.mkdirSync(outDir, { recursive: true });
    await page.screenshot({ path: path.join(outDir, "serve-experts.png"), fullPage: true });
    check(w.errors.length === 0, "no page error on the mixture of experts" + (w.errors.length ? ": " + w.errors.join("; ") : ""));
    await page.close();
  } finally { server.proc.kill("SIGTERM"); }
}

async function densePage(browser) {
  const server = await startServer(cli, dense, []);
  try {
    const { page, w } = await openPage(browser, server);
    await page.click(`#heatmap td.cell[data-layer="0"][data-pos="1"]`);
    await page.waitForSelector("#attr-table", { timeout: 120000 });
    check(await page.$eval("#routing-wrap", (e) => e.hidden), "a dense model's cell shows no routing panel");
    check(!w.routes.includes("/api/experts"), "and asks no POST /api/experts");
    check(w.errors.length === 0, "no page error on the dense model" + (w.errors.length ? ": " + w.errors.join("; ") : ""));
    await page.close();
  } finally { server.proc.kill("SIGTERM"); }
}

async function main() {
  if (!cli || !moe || !dense || !outDir) throw new Error("usage: experts_page_test.js VOCABLENS_CLI MOE_MODEL DENSE_MODEL OUT_DIR");
  for (const m of [moe, dense]) if (!fs.existsSync(m)) throw new Error("fixture missing: " + m);
  const puppeteer = require(path.join(path.resolve(outDir), "node_modules", "puppeteer-core"));
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "vlserve-experts-"));
  const browser = await puppeteer.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", `--user-data-dir=${profile}`],
    defaultViewport: { width: 1500, height: 900 },
  });
  try {
    await moePage(browser);
    await densePage(browser);
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log(failed() ? `${failed()} check(s) failed` : "all checks passed");
  process.exit(failed() ? 1 : 0);
}

main().catch((e) => { console.error("error: " + (e && e.stack || e)); process.exit(1); });
