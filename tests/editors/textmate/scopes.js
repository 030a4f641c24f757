#!/usr/bin/env node
// Tokenize files with the Tile TextMate grammar in the engine VS Code uses (vscode-textmate +
// vscode-oniguruma) and print the scopes as JSON:
//   {"<file>": [[{"start": 0, "end": 6, "text": "kernel", "scopes": ["source.tile", ...]}, ...], ...]}
// (one array of tokens per line).  Usage: node scopes.js GRAMMAR.json FILE...
'use strict';
const fs = require('fs');
const path = require('path');
const oniguruma = require('vscode-oniguruma');
const vsctm = require('vscode-textmate');

async function main() {
  const [grammarPath, ...files] = process.argv.slice(2);
  if (!grammarPath || files.length === 0) {
    console.error('usage: node scopes.js GRAMMAR.json FILE...');
    process.exit(2);
  }
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve('vscode-oniguruma')), 'onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async () => vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath),
  });
  const grammar = await registry.loadGrammar('source.tile');
  if (!grammar) throw new Error('grammar source.tile did not load');
  const out = {};
  for (const file of files) {
    const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/);
    let state = vsctm.INITIAL;
    out[file] = lines.map((line) => {
      const r = grammar.tokenizeLine(line, state);
      state = r.ruleStack;
      return r.tokens.map((t) => ({
        start: t.startIndex,
        end: Math.min(t.endIndex, line.length),
        text: line.slice(t.startIndex, t.endIndex),
        scopes: t.scopes,
      }));
    });
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e && e.stack || String(e)); process.exit(1); });
