// Compares the conformance suite's results check by check: for each
// requirement set, the checks that pass against the fixture server
// directly must be exactly the checks that pass through each Switchboard
// way (remote, local), but for the differences pinned by name in the
// baseline. A pin that no longer differs is reported too, so that the
// list stays true.
//
//   node compare.js <results dir> <baseline.yml> <revision>...
//
// <results dir>/<way>-<revision>/server-<scenario>-<timestamp>/checks.json
// are the suite's files (-o). A check is named scenario:check-id (with
// #n appended to the n-th repeat of an id within a scenario).
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

const [dir, baselineFile, ...revisions] = process.argv.slice(2);
const ways = ["remote", "local"];
const baseline = YAML.parse(fs.readFileSync(baselineFile, "utf8")) || {};

// checks returns Map(check name -> status) of one run.
function checks(run) {
  const out = new Map();
  const root = path.join(dir, run);
  if (!fs.existsSync(root)) return out;
  for (const d of fs.readdirSync(root)) {
    const m = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(d);
    const file = path.join(root, d, "checks.json");
    if (!m || !fs.existsSync(file)) continue;
    const seen = new Map();
    for (const c of JSON.parse(fs.readFileSync(file, "utf8"))) {
      const n = (seen.get(c.id) || 0) + 1;
      seen.set(c.id, n);
      out.set(`${m[1]}:${c.id}${n > 1 ? "#" + n : ""}`, c.status);
    }
  }
  return out;
}

const passed = (m) => new Set([...m].filter(([, s]) => s === "SUCCESS").map(([k]) => k));
let failed = false;
const used = new Map(ways.map((w) => [w, new Set()]));
for (const rev of revisions) {
  const direct = checks(`direct-${rev}`);
  if (direct.size === 0) {
    console.log(`✗ ${rev}: no results against the fixture server directly`);
    failed = true;
    continue;
  }
  const want = passed(direct);
  for (const way of ways) {
    const got = checks(`${way}-${rev}`);
    const have = passed(got);
    const pins = new Set(baseline[way] || []);
    const diff = [];
    for (const k of want) if (!have.has(k)) diff.push([k, `passes directly, ${got.get(k) || "missing"} through Switchboard`]);
    for (const k of have) if (!want.has(k)) diff.push([k, `passes through Switchboard, ${direct.get(k) || "missing"} directly`]);
    let bad = 0;
    for (const [k, why] of diff) {
      if (pins.has(k)) {
        used.get(way).add(k);
        console.log(`  pinned ${rev} ${way} ${k}: ${why}`);
        continue;
      }
      bad++;
      console.log(`✗ ${rev} ${way} ${k}: ${why}`);
    }
    const total = [...direct.keys()].length;
    console.log(`${bad ? "✗" : "✓"} ${rev} ${way}: ${have.size} of ${total} checks pass through Switchboard, ${want.size} directly; ${diff.length - bad} pinned difference(s), ${bad} unexpected`);
    if (bad) failed = true;
  }
}
for (const way of ways) {
  for (const k of baseline[way] || []) {
    if (!used.get(way).has(k)) {
      console.log(`✗ ${way} ${k} is pinned in the baseline but no longer differs: remove it`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
