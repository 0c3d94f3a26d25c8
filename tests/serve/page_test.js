#!/usr/bin/env node
// `vocablens serve`'s page in Debian's headless chromium, driven by puppeteer-core: type a prompt, see the
// lens heatmap, click a cell, see its top-k and its direct logit attribution, click a head, reload from the
// URL (the state is in its hash), the SAE features firing at a cell and a feature's page (an SAE from the fixture
// generator, a small corpus), two prompts side by side, the reading aids (a header of what to do, a layer's cell
// attributing its own residual, colour legends, contrast >= 4.5, significant digits, panels in view at 1280x800,
// two panel columns at 1920x1080, no SAE / tuned controls without them), and no page error on the way. Writes
// screenshots to OUT_DIR/serve.png, serve-features.png, serve-1280x800.png and serve-1920x1080.png.
//
//   node tests/serve/page_test.js build/vocablens ../shared/fixtures/gpt2-tiny build/serve
// (OUT_DIR/node_modules holds puppeteer-core: scripts/setup.sh installs tests/serve/package-lock.json there.)
"use strict";
const { spawnSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const [cli, model, outDir] = process.argv.slice(2);
const PROMPT = "The Eiffel Tower is in the city of";
const TRANSCODERS = path.join(__dirname, "..", "fixtures", "graph", "gpt2-tiny");
const { check, failed, startServer: startOn } = require("./page_support");
const startServer = (extra) => startOn(cli, model, extra);

async function main() {
  if (!cli || !model || !outDir) throw new Error("usage: page_test.js VOCABLENS_CLI MODEL_DIR OUT_DIR");
  if (!fs.existsSync(model)) throw new Error("fixture missing: " + model);
  const puppeteer = require(path.join(path.resolve(outDir), "node_modules", "puppeteer-core"));
  // An SAE (the fixture generator's standard one) and a small corpus: the feature pages and top activations.
  // --standard-only writes that SAE alone, the same bytes as a full run (0.14 s of CPU instead of 0.54 s: the
  // other layouts and the dense logit references are not read here).
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "vlserve-chromium-"));
  const gen = spawnSync("/usr/bin/python3", [path.join(__dirname, "..", "fixtures", "sae", "make_saes.py"), "--standard-only", path.join(profile, "saes")]);
  if (gen.status !== 0) throw new Error("make_saes.py failed: " + gen.stderr);
  const corpus = path.join(profile, "corpus.txt");
  fs.writeFileSync(corpus, ("The Eiffel Tower is in Paris. Rome is the capital of Italy. The river runs through the city.\n").repeat(8));
  // --hook names the SAE's point as `features --hook` does (here the file's own: the panels below show it).
  const server = await startServer(["--sae", path.join(profile, "saes", "saelens_standard"), "--hook", "blocks.1.hook_resid_pre",
                                    "--corpus", corpus, "--transcoders", TRANSCODERS]);
  let browser = null;
  const kill = () => { try { server.proc.kill("SIGTERM"); } catch (e) { /* gone */ } };
  process.on("exit", kill);
  try {
    browser = await puppeteer.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             `--user-data-dir=${profile}`],
      defaultViewport: { width: 1500, height: 900 },
    });
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
    page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
    page.on("requestfailed", (r) => {
      const f = r.failure();
      if (!(f && /ERR_ABORTED/.test(f.errorText))) errors.push("request failed: " + r.url() + " " + (f && f.errorText));
    });
    const external = [];
    page.on("request", (r) => { if (!r.url().startsWith(server.url) && !r.url().startsWith("data:")) external.push(r.url()); });

    await page.goto(server.url, { waitUntil: "load" });
    await page.waitForFunction(() => !document.getElementById("model-meta").textContent.startsWith("loading"), { timeout: 60000 });
    const meta = await page.$eval("#model-meta", (e) => e.textContent);
    check(/gpt2-tiny/.test(meta) && /50257/.test(meta), "the header names the model and its vocabulary: " + meta.slice(0, 100));

    // Type a prompt: the heatmap (layer x position) appears on the first screen.
    await page.type("#prompt", PROMPT);
    await page.keyboard.press("Enter");
    await page.waitForSelector("td.cell", { timeout: 120000 });
    const grid = await page.evaluate(() => ({
      rows: document.querySelectorAll("#heatmap tbody tr").length,
      cols: document.querySelectorAll("#heatmap thead th.input").length,
      cells: document.querySelectorAll("td.cell").length,
      box: document.querySelector("#heatmap").getBoundingClientRect().top,
    }));
    // The same prompt through the API: T tokens, n_layers + 1 rows (the embedding and every block's output).
    const ref = await page.evaluate(async (p) => {
      const r = await fetch("/api/lens", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: p, top_k: 10 }) });
      const j = await r.json();
      return { layers: j.summary.layers.length, T: j.summary.n_tokens, top: j.arrays.top_probs.data };
    }, PROMPT);
    check(grid.rows === ref.layers && grid.cols === ref.T && grid.cells === ref.layers * ref.T,
          `heatmap: ${grid.rows} layers x ${grid.cols} positions = ${grid.cells} cells (API: ${ref.layers} x ${ref.T})`);
    check(grid.box < 900, `heatmap on the first screen (top at ${Math.round(grid.box)} px)`);

    // Click a cell: its top-k and the direct logit attribution of its top-1 token at that position.
    const L = ref.layers - 1, P = ref.T - 1;
    await page.click(`td.cell[data-layer="${L}"][data-pos="${P}"]`);
    await page.waitForSelector("#topk-table tr:nth-child(3)", { timeout: 30000 });
    await page.waitForSelector("#attr-table tr", { timeout: 120000 });
    const cell = await page.evaluate(() => ({
      cellText: document.querySelector("td.cell.sel").textContent,
      top: [...document.querySelectorAll("#topk-table tr")].slice(1).map((r) => [r.children[1].textContent, +r.children[2].textContent]),
      parts: [...document.querySelectorAll("#attr-table tr")].map((r) => r.children[0].textContent),
      heads: document.querySelectorAll("#head-grid td.head").length,
      hash: location.hash,
    }));
    check(cell.top.length === 10 && cell.top[0][0] === cell.cellText, `top-k of the cell: ${cell.top.length} tokens, first = the cell's (${cell.cellText})`);
    const apiTop = ref.top[L][P];
    check(cell.top.every(([, p], k) => Math.abs(p - apiTop[k]) < 1e-4), "top-k probabilities = the API's top_probs");
    check(cell.parts.length > 3 && cell.parts.some((x) => /^L\d+H\d+$/.test(x) || /^MLP\d+$/.test(x)) && cell.heads > 0,
          `attribution: ${cell.parts.length} largest parts (${cell.parts.slice(0, 4).join(", ")}), ${cell.heads} heads in the grid`);
    check(/prompt=/.test(cell.hash) && new RegExp(`cell=${L}%2C${P}`).test(cell.hash), "the URL holds the prompt and the cell: " + cell.hash.slice(0, 80));

    // Click a head: its OV/QK token pairs (when the server has the heads analysis).
    const hasHeads = await page.evaluate(async () => (await (await fetch("/api/analyses")).json()).some((a) => a.name === "heads"));
    if (hasHeads) {
      await page.click('#head-grid td.head[data-layer="0"][data-head="0"]');
      await page.waitForSelector('#head-body table[data-kind="ov"] tr:nth-child(2)', { timeout: 180000 });
      check(true, "a head: its OV token pairs");
    }
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(outDir, "serve.png") });
    // The SAE features firing at the selected cell's position; click one: its page (vocabulary projection =
    // the API's, top activations over the corpus), its index in the URL.
    await page.waitForSelector("#cell-features-table tr[data-feature]", { timeout: 60000 });
    check(/blocks\.1\.hook_resid_pre/.test(await page.$eval("#cell-features", (e) => e.textContent)),
          "serve --hook: the SAE reads the point given (blocks.1.hook_resid_pre)");
    const feature = await page.$eval("#cell-features-table tr[data-feature]", (e) => +e.dataset.feature);
    await page.click("#cell-features-table tr[data-feature]");
    await page.waitForSelector("#feature-projection td[data-id]", { timeout: 60000 });
    await page.waitForSelector(".top-acts tr mark", { timeout: 60000 });
    const fpage = await page.evaluate(async (f) => {
      const r = await (await fetch("/api/sae/features", { method: "POST", headers: { "Content-Type": "application/json" },
                                                          body: JSON.stringify({ features: [f], top_k: 10 }) })).json();
      return { api: r.arrays.top_ids.data[0], shown: [...document.querySelectorAll("#feature-projection td[data-id]")].slice(0, 10).map((e) => +e.dataset.id),
               acts: document.querySelectorAll("#feature-body .top-acts tr").length, hash: location.hash };
    }, feature);
    check(JSON.stringify(fpage.api) === JSON.stringify(fpage.shown) && fpage.acts > 0 && new RegExp(`feature=${feature}(&|$)`).test(fpage.hash),
          `SAE feature #${feature} from the cell: its top tokens = the API's, ${fpage.acts} top activations, in the URL`);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(outDir, "serve-features.png"), fullPage: true });

    // Colour toggles: the metric goes into the URL, the cells are recoloured.
    const before = await page.$eval('td.cell[data-layer="0"][data-pos="0"]', (e) => e.style.background);
    await page.click('input[name="metric"][value="entropy"]');
    const after = await page.$eval('td.cell[data-layer="0"][data-pos="0"]', (e) => e.style.background);
    check(/metric=entropy/.test(page.url()) && before !== after, "colour toggle: entropy recolours the cells, in the URL");
    await page.click('input[name="metric"][value="prob"]');

    // Reload from the URL alone: the same heatmap and the same cell come back.
    const url = page.url();
    const page2 = await browser.newPage();
    page2.on("pageerror", (e) => errors.push("pageerror: " + e.message));
    await page2.bringToFront();
    await page2.goto(url, { waitUntil: "load" });
    await page2.waitForSelector("td.cell.sel", { timeout: 120000 });
    await page2.waitForSelector("#topk-table tr:nth-child(3)", { timeout: 30000 });
    const again = await page2.evaluate(() => ({ prompt: document.getElementById("prompt").value,
      sel: [+document.querySelector("td.cell.sel").dataset.layer, +document.querySelector("td.cell.sel").dataset.pos], n: document.querySelectorAll("td.cell").length }));
    check(again.prompt === PROMPT && again.sel[0] === L && again.sel[1] === P && again.n === grid.cells,
          "reloaded from the URL: prompt, heatmap and selected cell restored " + JSON.stringify(again));
    await page2.waitForSelector("#feature-projection td[data-id]", { timeout: 60000 });
    await page2.waitForSelector("#head-body table[data-kind] tr", { timeout: 120000 });
    check(true, "reloaded from the URL: the head and the SAE feature panels restored");

    // Two prompts side by side: the second heatmap has the API's layers x its own positions; in the URL.
    const SECOND = "Rome is the capital of";
    await page2.type("#compare", SECOND);
    await page2.keyboard.press("Enter");
    await page2.waitForSelector("#heatmap2 td.cell2", { timeout: 120000 });
    const pair = await page2.evaluate(async (p) => {
      const r = await (await fetch("/api/lens", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: p, top_k: 10 }) })).json();
      return { want: r.summary.layers.length * r.summary.n_tokens, got: document.querySelectorAll("#heatmap2 td.cell2").length,
               a: document.querySelectorAll("#heatmap td.cell").length, visible: !document.getElementById("heat-b").hidden, hash: location.hash };
    }, SECOND);
    check(pair.visible && pair.got === pair.want && pair.a === grid.cells && /compare=Rome/.test(pair.hash),
          `compare: a second heatmap of ${pair.got} cells (API ${pair.want}) beside the first (${pair.a}), in the URL`);
    const page3 = await browser.newPage();
    page3.on("pageerror", (e) => errors.push("pageerror: " + e.message));
    await page3.goto(page2.url(), { waitUntil: "load" });
    await page3.waitForSelector("#heatmap2 td.cell2", { timeout: 120000 });
    check(await page3.$eval("#compare", (e) => e.value) === SECOND, "reloaded from the URL: the comparison restored");

    // ---- reading at a glance: header, own-layer attribution, legend, contrast, significant digits, layout ----
    const page4 = await browser.newPage();
    page4.on("pageerror", (e) => errors.push("pageerror: " + e.message));
    await page4.setViewport({ width: 1280, height: 800 });
    await page4.goto(server.url + "#prompt=" + encodeURIComponent(PROMPT), { waitUntil: "load" });
    await page4.waitForSelector("td.cell", { timeout: 120000 });
    const head = await page4.evaluate(() => ({ meta: document.getElementById("model-meta").textContent, how: document.getElementById("how").textContent }));
    check(!/analyses:/.test(head.meta) && /click a cell/.test(head.how) && /SAE/.test(head.how),
          "the header says what a user can do, not the registry: " + head.how.slice(0, 90));
    // A layer-1 cell attributes its own row (the residual before block 1), labelled so, with layer 0's parts only.
    await page4.click('td.cell[data-layer="1"][data-pos="2"]');
    await page4.waitForSelector("#attr-table tr", { timeout: 120000 });
    const own = await page4.evaluate(async (p) => {
      const lensTop = (await (await fetch("/api/lens", { method: "POST", headers: { "Content-Type": "application/json" },
                                                           body: JSON.stringify({ prompt: p, top_k: 1 }) })).json()).arrays.top_ids.data[1][2][0];
      const api = async (layer) => (await (await fetch("/api/attribute", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ prompt: p, target: "#" + lensTop, position: 2, ...(layer === null ? {} : { layer }) }) })).json()).summary.model_value;
      return { what: document.getElementById("attr-what").textContent, title: document.getElementById("attribution-title").textContent,
               rows: document.querySelectorAll("#head-grid tr").length - 1, l1: await api(1), fin: await api(null) };
    }, PROMPT);
    const shown = +(own.what.match(/lens (-?[\d.e+-]+)/) || [])[1];
    check(/after block 0/.test(own.what) && /after block 0/.test(own.title) && own.rows === 1 && Math.abs(shown - own.l1) <= 1e-3 * Math.max(1, Math.abs(own.l1)) &&
          Math.abs(own.l1 - own.fin) > 1e-6,
          `a layer-1 cell attributes its own residual: "${own.what.slice(0, 90)}", ${own.rows} layer row(s), lens ${shown} = API ${own.l1.toFixed(4)} (final ${own.fin.toFixed(4)})`);
    // Every coloured cell keeps a contrast ratio >= 4.5 between its text and its background (WCAG AA).
    const contrast = await page4.evaluate(() => {
      const rgb = (c) => (c.match(/[\d.]+/g) || []).slice(0, 3).map(Number);
      const lum = (c) => { const l = rgb(c).map((x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
                           return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2]; };
      let worst = 99, n = 0;
      for (const td of document.querySelectorAll("td.cell, #head-grid td.head, #head-grid td.mlp")) {
        const cs = getComputedStyle(td), a = lum(cs.color), b = lum(cs.backgroundColor);
        worst = Math.min(worst, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)); n++;
      }
      return { worst, n, legend: !!document.getElementById("heat-ramp") && !!document.getElementById("attr-ramp") };
    });
    check(contrast.n > 0 && contrast.worst >= 4.5 && contrast.legend,
          `colour legends shown; contrast of ${contrast.n} coloured cells >= 4.5 (worst ${contrast.worst.toFixed(2)})`);
    // A head's panel opens in view at 1280x800, its values in significant digits (a small value is not 0.000).
    await page4.click('#head-grid td.head[data-layer="0"][data-head="0"]');
    await page4.waitForSelector('#head-body table[data-kind="ov"] tr:nth-child(2)', { timeout: 180000 });
    await new Promise((r) => setTimeout(r, 300));
    const hp = await page4.evaluate(() => {
      const r = document.getElementById("head-panel").getBoundingClientRect();
      const vals = [...document.querySelectorAll("#head-body td.num")].map((e) => e.textContent);
      return { top: r.top, h: innerHeight, vals };
    });
    check(hp.top >= 0 && hp.top < hp.h - 40, `the head panel opens in view at 1280x800 (top at ${Math.round(hp.top)} px)`);
    check(hp.vals.length > 0 && hp.vals.every((v) => Number.isFinite(+v) && !/^-?0\.0+$/.test(v) && (+v === 0 || /[1-9]/.test(v))),
          "OV/QK values in significant digits: " + hp.vals.slice(0, 4).join(" "));
    await page4.evaluate(() => window.scrollTo(0, 0));
    await page4.screenshot({ path: path.join(outDir, "serve-1280x800.png") });
    await page4.setViewport({ width: 1920, height: 1080 });
    await new Promise((r) => setTimeout(r, 300));
    const cols = await page4.evaluate(() => getComputedStyle(document.querySelector("aside")).gridTemplateColumns.split(" ").length);
    check(cols >= 2, `at 1920x1080 the panels use ${cols} columns beside the heatmap`);
    await page4.screenshot({ path: path.join(outDir, "serve-1920x1080.png") });

    await graphView(browser, server, errors);
    check(external.length === 0, "no request leaves the server (offline): " + external.slice(0, 3).join(" "));
    check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join(" | ") : ""));
    // Without --sae, --corpus or --tuned: their controls are not shown at all.
    const bare = await startServer([]);
    try {
      const page5 = await browser.newPage();
      page5.on("pageerror", (e) => errors.push("pageerror: " + e.message));
      await page5.goto(bare.url, { waitUntil: "load" });
      await page5.waitForFunction(() => !document.getElementById("model-meta").textContent.startsWith("loading"), { timeout: 60000 });
      const vis = await page5.evaluate(() => ({ feature: document.getElementById("feature-form").offsetParent !== null,
        graph: document.getElementById("tab-graph").offsetParent !== null,
        lens: document.getElementById("lens-choice").offsetParent !== null, how: document.getElementById("how").textContent }));
      check(!vis.feature && !vis.lens && !vis.graph && !/SAE|tuned|corpus|Graph/.test(vis.how),
            "a server without SAE, corpus or tuned lens shows none of their controls: " + JSON.stringify(vis));
    } finally { try { bare.proc.kill("SIGTERM"); } catch (e) { /* gone */ } }
  } finally {
    if (browser) await browser.close();
    kill();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log(`${failed()} failure(s)`);
  return failed() ? 1 : 0;
}

// ---- the graph view (serve --transcoders): the fixture's attribution graph drawn by layer x position, a node's
// label on hover, a feature's page on click, pins in the URL restored on reload, a cancelled graph freeing its worker.
async function graphView(browser, server, errors) {
  const page = await browser.newPage();
  page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
  await page.goto(server.url + "#prompt=" + encodeURIComponent(PROMPT), { waitUntil: "load" });
  await page.waitForFunction(() => !document.getElementById("views").hidden, { timeout: 60000 });
  await page.click("#tab-graph");
  check(await page.$eval("#graph-prompt", (e) => e.value) === PROMPT, "the Graph tab opens with the prompt of the lens");
  await page.click("#graph-run");
  await page.waitForSelector("#graph-svg .gnode", { timeout: 120000 });
  const drawn = await page.evaluate(async (p) => {
    const r = await (await fetch("/api/graph", { method: "POST", headers: { "Content-Type": "application/json" },
                                                 body: JSON.stringify({ prompt: p, transcoders: true }) })).json();
    const centre = (e) => { const b = e.getBoundingClientRect(); return [b.x + b.width / 2, b.y + b.height / 2]; };
    return { api: r.summary.neuronpedia, L: r.summary.n_layers,
             nodes: [...document.querySelectorAll("#graph-svg .gnode")].map((g) => ({ key: g.dataset.node, type: g.dataset.type, at: centre(g) })),
             edges: [...document.querySelectorAll("#graph-svg line.edge")].map((e) => +e.getAttribute("stroke-width")),
             toks: [...document.querySelectorAll("#graph-svg text.gtok title")].map((e) => e.textContent), hash: location.hash };
  }, PROMPT);
  const api = drawn.api, errKey = (n) => (n.feature_type === "mlp reconstruction error" ? `err_${n.layer}_${n.ctx_idx}` : n.node_id);
  const byKey = new Map(api.nodes.map((n) => [errKey(n), n]));
  check(drawn.nodes.length === api.nodes.length && drawn.nodes.every((g) => byKey.has(g.key) && byKey.get(g.key).feature_type === g.type) &&
        drawn.edges.length === api.links.length && JSON.stringify(drawn.toks) === JSON.stringify(api.metadata.prompt_tokens),
        `graph view: ${drawn.nodes.length} nodes and ${drawn.edges.length} edges drawn (API: ${api.nodes.length}, ${api.links.length}), ` +
        `the prompt's ${drawn.toks.length} tokens along the bottom; in the URL: ${drawn.hash.slice(0, 60)}`);
  // Layout: a higher row for a later layer (tokens lowest, logits highest), columns left to right by position.
  const row = (n) => (n.feature_type === "embedding" ? 0 : n.feature_type === "logit" ? drawn.L + 1 : +n.layer + 1);
  let rowsOk = true, colsOk = true;
  for (const a of drawn.nodes) for (const b of drawn.nodes) {
    const na = byKey.get(a.key), nb = byKey.get(b.key);
    if (row(na) < row(nb) && !(a.at[1] > b.at[1])) rowsOk = false;
    if (na.ctx_idx < nb.ctx_idx && !(a.at[0] < b.at[0])) colsOk = false;
  }
  check(rowsOk && colsOk, "nodes placed by layer (tokens at the bottom, logits at the top) and by position (left to right)");
  const ws = api.links.map((e) => Math.abs(e.weight)), wmax = Math.max(...ws), imax = ws.indexOf(wmax), imin = ws.indexOf(Math.min(...ws));
  check(drawn.edges[imax] === Math.max(...drawn.edges) && drawn.edges[imin] === Math.min(...drawn.edges) && drawn.edges[imax] > 3 * drawn.edges[imin],
        `edge width by |weight|: the strongest link ${drawn.edges[imax]} px, the weakest ${drawn.edges[imin]} px`);
  // Hover a feature: its vocabulary label (clerp), activation and influence.
  const feat = api.nodes.filter((n) => n.feature_type === "cross layer transcoder").sort((a, b) => b.influence - a.influence)[0];
  await page.hover(`#graph-svg .gnode[data-node="${feat.node_id}"]`);
  await page.waitForSelector("#graph-tip:not([hidden])", { timeout: 5000 });
  const tip = await page.$eval("#graph-tip", (e) => e.textContent);
  check(tip.includes(feat.clerp) && /activation/.test(tip) && /influence/.test(tip), `hover: the node's label "${feat.clerp}" (${tip.slice(0, 90)})`);
  // Click it: its page, the tokens it promotes and suppresses through W_U and the ones it reads through E⁺.
  await page.click(`#graph-svg .gnode[data-node="${feat.node_id}"]`);
  await page.waitForSelector("#graph-feature-tokens", { timeout: 5000 });
  const fp = await page.evaluate(() => ({ rows: [...document.querySelectorAll("#graph-feature-tokens tr")].map((r) => r.children[1].textContent),
                                          inputs: document.querySelectorAll("#graph-node-body .graph-inputs tr").length, hash: location.hash }));
  check(fp.rows[0] === feat.clerp && fp.rows[1].length > 0 && fp.rows[2].length > 0 && fp.inputs > 0 && fp.hash.includes("node=" + feat.node_id),
        `click: the feature's page (promotes "${fp.rows[0]}", suppresses "${fp.rows[1]}", reads "${fp.rows[2]}", ${fp.inputs} inputs), in the URL`);
  // Pin two nodes (shift-click), show them alone: in the URL; a reload restores the pinned subgraph.
  const logit = api.nodes.find((n) => n.feature_type === "logit");
  await page.keyboard.down("Shift");
  await page.click(`#graph-svg .gnode[data-node="${feat.node_id}"]`);
  await page.click(`#graph-svg .gnode[data-node="${logit.node_id}"]`);
  await page.keyboard.up("Shift");
  await page.click("#graph-sub");
  const pinned = await page.evaluate(() => ({ keys: [...document.querySelectorAll("#graph-svg .gnode")].map((g) => g.dataset.node).sort(),
                                              hash: location.hash, url: location.href }));
  const want = [feat.node_id, logit.node_id].sort();
  const pinsInUrl = new URLSearchParams(pinned.hash.slice(1));
  check(JSON.stringify(pinned.keys) === JSON.stringify(want) && pinsInUrl.get("pins") === `${feat.node_id},${logit.node_id}` && pinsInUrl.get("sub") === "1",
        `pinned subgraph: ${pinned.keys.join(", ")} shown alone; the URL holds it (${pinned.hash.slice(0, 120)})`);
  const again = await browser.newPage();
  again.on("pageerror", (e) => errors.push("pageerror: " + e.message));
  await again.goto(pinned.url, { waitUntil: "load" });
  await again.waitForSelector("#graph-svg .gnode", { timeout: 120000 });
  const back = await again.evaluate(() => ({ keys: [...document.querySelectorAll("#graph-svg .gnode")].map((g) => g.dataset.node).sort(),
    lensHidden: document.querySelector(".layout").hidden, pinned: document.querySelectorAll("#graph-svg .gnode.pinned").length }));
  check(JSON.stringify(back.keys) === JSON.stringify(want) && back.pinned === 2 && back.lensHidden,
        "reloaded from the URL: the graph view with the pinned subgraph alone " + JSON.stringify(back.keys));
  // The pins edited in the URL by hand: the subgraph follows.
  await again.evaluate((k) => { const h = new URLSearchParams(location.hash.slice(1)); h.set("pins", k); location.hash = h.toString(); }, logit.node_id);
  const edited = await again.waitForFunction(() => document.querySelectorAll("#graph-svg .gnode").length === 1, { timeout: 5000, polling: 50 })
    .then(() => again.$$eval("#graph-svg .gnode", (gs) => gs.map((g) => g.dataset.node)), () => null);
  check(edited && edited[0] === logit.node_id, `pins edited in the URL: the subgraph drawn again (${JSON.stringify(edited)})`);
  await again.close();
  await page.bringToFront();  // a background tab's timers and animation frames are throttled
  await page.click("#graph-sub");  // the whole graph again, for the screenshot
  await page.screenshot({ path: path.join(outDir, "serve-graph.png") });

  // A long prompt (~117 tokens: every active feature's row, seconds): its progress shows, Cancel stops it and the
  // server frees the worker at once, the job counted as cancelled.
  const LONG = Array(9).fill("The river runs through the old city and the bridge crosses it.").join(" ");
  const before = await page.evaluate(async () => (await (await fetch("/api/status")).json()).cancelled);
  await page.$eval("#graph-prompt", (e, v) => { e.value = v; }, LONG);
  await page.click("#graph-run");
  await page.waitForFunction(() => /backward rows [1-9]\d* \/ \d+/.test(document.getElementById("graph-progress").textContent),
                         { timeout: 120000, polling: 50 });
  const at = await page.$eval("#graph-progress", (e) => e.textContent);
  const [, done, total] = at.match(/backward rows (\d+) \/ (\d+)/).map(Number);
  await page.click("#graph-cancel");
  const t0 = Date.now();
  const freed = await page.evaluate(async (before) => {
    for (let i = 0; i < 200; ++i) {
      const s = await (await fetch("/api/status")).json();
      if (s.running === 0 && s.cancelled > before) return s;
      await new Promise((r) => setTimeout(r, 25));
    }
    return null;
  }, before);
  const took = (Date.now() - t0) / 1000;
  const after = await page.evaluate(() => ({ text: document.getElementById("graph-progress").textContent,
    cancel: document.getElementById("graph-cancel").hidden, run: document.getElementById("graph-run").disabled }));
  check(done < total && freed !== null && took < 2 && /cancelled/.test(after.text) && after.cancel && !after.run,
        `Cancel at "${at.slice(0, 60)}": the worker free again in ${took.toFixed(2)} s, the job counted as cancelled; "${after.text.slice(0, 60)}"`);
  await page.close();
}

main().then((rc) => process.exit(rc), (e) => { console.log("FAIL  " + (e && e.stack || e)); process.exit(1); });
