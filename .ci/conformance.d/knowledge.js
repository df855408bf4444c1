// Checks the knowledge run of .ci/conformance: every scenario named ran
// (its checks.json exists), every check of it is SUCCESS (a FAILURE or a
// WARNING fails), and resources-list listed at least one resource, so
// that an empty source cannot pass it vacuously.
//
//   node knowledge.js <results dir> <scenario>...
"use strict";
const fs = require("fs");
const path = require("path");

const [dir, ...scenarios] = process.argv.slice(2);
let failed = false;
for (const sc of scenarios) {
  const runs = fs.existsSync(dir) ? fs.readdirSync(dir).filter((d) => d.startsWith(`server-${sc}-`)) : [];
  const file = runs.length === 1 ? path.join(dir, runs[0], "checks.json") : "";
  if (!file || !fs.existsSync(file)) {
    console.log(`✗ ${sc}: no results`);
    failed = true;
    continue;
  }
  const checks = JSON.parse(fs.readFileSync(file, "utf8"));
  const bad = checks.filter((c) => c.status !== "SUCCESS");
  for (const c of bad) console.log(`✗ ${sc}:${c.id}: ${c.status}${c.errorMessage ? " (" + c.errorMessage + ")" : ""}`);
  const list = checks.find((c) => c.id === "resources-list");
  const empty = sc === "resources-list" && !(list && list.details && list.details.resourceCount > 0);
  if (empty) console.log(`✗ ${sc}: the knowledge source listed no resources`);
  if (checks.length === 0 || bad.length > 0 || empty) failed = true;
  else console.log(`✓ ${sc}: ${checks.length} checks pass`);
}
process.exit(failed ? 1 : 0);
