#!/usr/bin/env node
// The static report's first-screen rule, in Debian's headless chromium (puppeteer-core): the picture first,
// raw summaries folded. `vocablens lens MODEL --prompt <37 tokens> --out DIR --report` is opened at
// 1280 x 900 (a laptop's first screen): the lens heatmap's top is within the first 900 px, the summary,
// settings and provenance are folded (<details> without `open`) and come after the heatmap, and the page
// raises no error. (As a new user found it before: the heatmap ~3 400 px down, below an open raw summary.)
//
//   node tests/serve/report_first_screen.js build/vocablens ../shared/fixtures/gpt2-tiny build/serve
"use strict";
const { spawnSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const [cli, model, outDir] = process.argv.slice(2);
// 37 tokens with GPT-2's tokenizer (checked below).
const PROMPT = "The Eiffel Tower, built for the 1889 World's Fair in Paris, is a wrought-iron lattice tower that became " +
               "the most visited paid monument in the world and a symbol";
let failures = 0;
function check(cond, what) {
  console.log((cond ? "ok    " : "FAIL  ") + what);
  if (!cond) failures++;
  return cond;
}

async function main() {
  if (!cli || !model || !outDir) throw new Error("usage: report_first_screen.js VOCABLENS_CLI MODEL_DIR OUT_DIR");
  if (!fs.existsSync(model)) throw new Error("fixture missing: " + model);
  const puppeteer = require(path.join(path.resolve(outDir), "node_modules", "puppeteer-core"));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "vlreport-"));
  let browser = null;
  try {
    const run = path.join(tmp, "run");
    const r = spawnSync(cli, ["lens", model, "--prompt", PROMPT, "--top-k", "5", "--out", run, "--report"], { encoding: "utf8" });
    if (r.status !== 0) throw new Error("vocablens lens --report failed: " + r.stderr);
    const lens = JSON.parse(fs.readFileSync(path.join(run, "logit_lens.json"), "utf8"));
    check(lens.summary.n_tokens === 37, `the prompt is ${lens.summary.n_tokens} tokens (37 wanted)`);
    browser = await puppeteer.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", `--user-data-dir=${path.join(tmp, "profile")}`],
      defaultViewport: { width: 1280, height: 900 },
    });
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
    page.on("console", (m) => errors.push("console: " + m.text()));
    await page.goto("file://" + path.join(run, "report.html"), { waitUntil: "load" });
    const m = await page.evaluate(() => {
      const sec = document.querySelector("section.result");
      const fig = sec.querySelector("figure svg, svg");
      const top = (e) => (e ? e.getBoundingClientRect().top + window.scrollY : null);
      const summary = sec.querySelector("details.summary");
      const meta = sec.querySelector("details.meta");
      return {
        heat: top(fig),
        title: (sec.querySelector("figure figcaption, figure h3, figure .title") || {}).textContent || "",
        summaryOpen: summary ? summary.open : null, summaryTop: top(summary),
        metaOpen: meta ? meta.open : null, metaTop: top(meta),
        openDetails: [...sec.querySelectorAll("details[open]")].map((d) => d.className),
      };
    });
    check(m.heat !== null && m.heat < 900, `the heatmap's top is at ${Math.round(m.heat)} px: within the first screen (900 px)`);
    check(m.summaryOpen === false && m.summaryTop > m.heat, `the raw summary is folded, below the heatmap (at ${Math.round(m.summaryTop)} px)`);
    check(m.metaOpen === false && m.metaTop > m.heat, `settings and provenance are folded, below the heatmap (at ${Math.round(m.metaTop)} px)`);
    check(m.openDetails.length === 0, "nothing else is unfolded: " + JSON.stringify(m.openDetails));
    await page.screenshot({ path: path.join(outDir, "report-first-screen.png") });
    check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join(" | ") : ""));
  } finally {
    if (browser) await browser.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`${failures} failure(s)`);
  return failures ? 1 : 0;
}

main().then((rc) => process.exit(rc), (e) => { console.log("FAIL  " + (e && e.stack || e)); process.exit(1); });
