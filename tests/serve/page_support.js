// What the explorer's browser tests share (page_test.js, experts_page_test.js): their pass/fail lines and a
// `vocablens serve` on 127.0.0.1 and a free port, resolved once it prints its URL.
"use strict";
const { spawn } = require("child_process");

let failures = 0;
function check(cond, what) {
  console.log((cond ? "ok    " : "FAIL  ") + what);
  if (!cond) failures++;
  return cond;
}
function failed() { return failures; }

function startServer(cli, model, extra) {
  return new Promise((resolve, reject) => {
    const p = spawn(cli, ["serve", model, "--host", "127.0.0.1", "--port", "0", ...extra], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    const timer = setTimeout(() => reject(new Error("no URL from vocablens serve within 180 s: " + err)), 180000);
    p.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:\d+\//);
      if (m) { clearTimeout(timer); resolve({ proc: p, url: m[0] }); }
    });
    p.stderr.on("data", (d) => { err += d; });
    p.on("exit", (code) => { clearTimeout(timer); reject(new Error(`vocablens serve exited with ${code}: ${err}`)); });
  });
}

module.exports = { check, failed, startServer };
