// speedscope's own importer on a speedscope file (shared by
// tests/lua/test_speedscope.lua and tests/windows/outputs.py, the Windows
// build's file under Wine): how it loads the package's browser bundle is
// said in test_speedscope.lua above its use.
// Usage: node speedscope_import.js NPM_PREFIX PROFILE EXPECT_JSON
//   NPM_PREFIX  the directory npm installed speedscope@1.25.0 into
//   EXPECT_JSON {"profileName", "totalWeight", "frames": [{"name", "file",
//               "line", "self", "total"}], "edges": [[caller, callee]]},
//               strings hex-encoded UTF-8 (null for none)
// Prints "all checks passed" (exit 0) or a FAIL line per failed check.
'use strict';
const fs = require('fs'), path = require('path'), vm = require('vm');
const [pkg, profilePath, expectPath] = process.argv.slice(2);
let failed = 0;
function check(cond, msg) { if (!cond) { failed++; console.log('FAIL ' + msg); } return cond; }
const unhex = h => (h === null || h === undefined) ? h : Buffer.from(h, 'hex').toString('utf8');

const top = path.join(pkg, 'node_modules', 'speedscope');
const rel = path.join(top, 'dist', 'release');
const version = JSON.parse(fs.readFileSync(path.join(top, 'package.json'), 'utf8')).version;
const bundle = fs.readdirSync(rel).find(f => /^speedscope-[A-Za-z0-9]+\.js$/.test(f));
if (!bundle) { console.log('FAIL no speedscope-*.js bundle in ' + rel); process.exit(1); }

// Load the bundle.
class StopUI extends Error {}
const logs = [];
const sandbox = {
  console: { log: (...a) => logs.push(a.join(' ')), info() {}, warn() {},
             error: (...a) => logs.push('error: ' + a.join(' ')) },
  TextEncoder, TextDecoder, URL, atob, btoa, setTimeout, clearTimeout,
  location: { hash: '', search: '', href: 'file:///speedscope/index.html', protocol: 'file:' },
  navigator: { userAgent: 'node', platform: 'node' },
  addEventListener() {}, removeEventListener() {},
};
sandbox.window = sandbox; sandbox.self = sandbox;
sandbox.document = {};
Object.defineProperty(sandbox.document, 'body', { get() { throw new StopUI('ui'); } });
const ctx = vm.createContext(sandbox);
sandbox.__StopUI = StopUI;
vm.runInContext(`(() => {
  const define = Object.defineProperty;
  Object.defineProperty = function (o, k, d) {
    if (k === 'importProfileGroupFromText' && d && typeof d.get === 'function') globalThis.__importModule = o;
    return define.apply(this, arguments);
  };
})();`, ctx);
try {
  vm.runInContext(fs.readFileSync(path.join(rel, bundle), 'utf8'), ctx, { filename: bundle });
  console.log('note: the bundle loaded without starting its UI');
} catch (e) {
  if (!(e instanceof StopUI)) {
    console.log('FAIL loading ' + bundle + ': ' + String(e && e.message).slice(0, 300));
    process.exit(1);
  }
}

function validate(node, value, root, where, errs) {
  const known = ['$ref', '$schema', 'anyOf', 'const', 'enum', 'items', 'properties', 'required', 'title', 'type', 'definitions'];
  for (const k of Object.keys(node)) if (!known.includes(k)) errs.push(`schema keyword ${k} not understood by this check`);
  if (node.$ref) {
    const name = decodeURIComponent(node.$ref.replace(/^#\/definitions\//, ''));
    return validate(root.definitions[name], value, root, where, errs);
  }
  if (node.anyOf && !node.anyOf.some(n => { const e = []; validate(n, value, root, where, e); return e.length === 0; }))
    errs.push(`${where}: matches none of ${node.anyOf.map(n => n.$ref).join(', ')}`);
  if ('const' in node && value !== node.const) errs.push(`${where}: ${JSON.stringify(value)} is not ${JSON.stringify(node.const)}`);
  if (node.enum && !node.enum.includes(value)) errs.push(`${where}: ${JSON.stringify(value)} not in ${node.enum}`);
  const type = Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
  if (node.type && ![].concat(node.type).some(t => t === type || (t === 'integer' && Number.isInteger(value))))
    errs.push(`${where}: ${type} is not ${node.type}`);
  if (type === 'object') {
    for (const k of node.required || []) if (!(k in value)) errs.push(`${where}: ${k} missing`);
    for (const k of Object.keys(node.properties || {}))
      if (k in value) validate(node.properties[k], value[k], root, `${where}.${k}`, errs);
  }
  if (type === 'array' && node.items) value.forEach((v, i) => validate(node.items, v, root, `${where}[${i}]`, errs));
}

setTimeout(async () => {
  const mod = sandbox.__importModule;
  if (!check(mod && typeof mod.importProfileGroupFromText === 'function',
             'import module of speedscope ' + version + ' not found in ' + bundle)) process.exit(1);
  const exp = JSON.parse(fs.readFileSync(expectPath, 'utf8'));
  const bytes = fs.readFileSync(profilePath);
  let text;
  try { text = new TextDecoder('utf-8', { fatal: true }).decode(bytes); }
  catch (e) { check(false, 'file is not valid UTF-8'); text = bytes.toString('utf8'); }

  // The file format's JSON schema, as shipped with the package.
  const schema = JSON.parse(fs.readFileSync(path.join(rel, 'file-format-schema.json'), 'utf8'));
  const errs = [];
  validate(schema, JSON.parse(text), schema, '$', errs);
  check(errs.length === 0, 'schema: ' + errs.slice(0, 10).join('; '));

  // The importer.
  const group = await mod.importProfileGroupFromText(path.basename(profilePath), text);
  if (!check(group && group.profiles, 'importer returned ' + group)) process.exit(1);
  check(logs.includes('Importing as speedscope json file'),
        'detected as speedscope JSON: ' + JSON.stringify(logs.filter(l => /Importing/.test(l))));
  check(group.profiles.length === 1, 'one profile, got ' + group.profiles.length);
  check(group.indexToView === 0, 'indexToView ' + group.indexToView);
  const prof = group.profiles[0];
  check(prof.getName() === unhex(exp.profileName), `profile name ${JSON.stringify(prof.getName())}`);
  check(prof.getWeightUnit() === 'nanoseconds', 'unit ' + prof.getWeightUnit());
  check(prof.getTotalWeight() === exp.totalWeight, `total weight ${prof.getTotalWeight()} != ${exp.totalWeight}`);
  const root = prof.getGroupedCalltreeRoot();
  const sum = root.children.reduce((s, c) => s + c.getTotalWeight(), 0);
  check(sum === exp.totalWeight, `sum of sample weights ${sum} != ${exp.totalWeight}`);

  // Frames: names, files, lines, self and total weights.
  const frames = new Map();
  prof.forEachFrame(f => frames.set(f.name + '\0' + (f.file || ''), f));
  check(frames.size === exp.frames.length, `${frames.size} frames imported, ${exp.frames.length} expected`);
  for (const e of exp.frames) {
    const name = unhex(e.name), file = unhex(e.file);
    const f = frames.get(name + '\0' + (file || ''));
    if (!check(f, `frame ${JSON.stringify(name)} (${file}) not imported; have ${JSON.stringify([...frames.keys()].slice(0, 20))}`)) continue;
    check(f.line === (e.line === null ? undefined : e.line), `${JSON.stringify(name)}: line ${f.line}, expected ${e.line}`);
    check(f.getSelfWeight() === e.self, `${JSON.stringify(name)}: self weight ${f.getSelfWeight()}, expected ${e.self}`);
    check(f.getTotalWeight() === e.total, `${JSON.stringify(name)}: total weight ${f.getTotalWeight()}, expected ${e.total}`);
  }

  // Caller -> callee pairs, as speedscope's call tree has them.
  const parents = new Map();
  (function walk(node) {
    for (const c of node.children) {
      const set = parents.get(c.frame.name) || new Set();
      set.add(node.frame ? node.frame.name : null);
      parents.set(c.frame.name, set);
      walk(c);
    }
  })(root);
  for (const [caller, callee] of exp.edges.map(([a, b]) => [unhex(a), unhex(b)])) {
    const ps = parents.get(callee);
    check(ps && ps.size === 1 && ps.has(caller),
          `${JSON.stringify(callee)} called by ${JSON.stringify(ps ? [...ps] : null)}, expected ${JSON.stringify(caller)}`);
  }
  console.log(`speedscope ${version} (${bundle}): imported ${frames.size} frames, total ${prof.getTotalWeight()} ns, ` +
              `${failed ? failed + ' checks failed' : 'all checks passed'}`);
  process.exit(failed ? 1 : 0);
}, 0);
