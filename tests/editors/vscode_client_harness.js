// Runs the VS Code extension's own activate() without VS Code: `require("vscode")` gets a
// stand-in with the settings given on the command line, and vscode-languageclient (the real
// one, from editors/vscode/node_modules) starts the configured server and initializes it.
//
//   node vscode_client_harness.js EXTENSION_DIR SETTINGS_JSON
//
// Prints one JSON line: {started, serverInfo, capabilities, errors, stopped} or {failed}.
"use strict";

const Module = require("module");
const path = require("path");

const [extDir, settingsJson] = process.argv.slice(2);
const settings = JSON.parse(settingsJson);
const errors = [];

class Disposable {
  constructor(fn) { this._fn = fn; }
  static from(...items) { return new Disposable(() => items.forEach((d) => d && d.dispose && d.dispose())); }
  dispose() { if (this._fn) { this._fn(); this._fn = undefined; } }
}

class EventEmitter {
  constructor() {
    this._listeners = [];
    this.event = (listener, thisArg) => {
      const bound = listener.bind(thisArg);
      this._listeners.push(bound);
      return new Disposable(() => { this._listeners = this._listeners.filter((l) => l !== bound); });
    };
  }
  fire(value) { this._listeners.slice().forEach((l) => l(value)); }
  dispose() { this._listeners = []; }
}

// Whatever else the client touches: callable, constructible, every member another stand-in,
// iterable as empty, never a promise.
function anything() {
  const target = function () {};
  return new Proxy(target, {
    get(_, key) {
      if (key === "then") return undefined;
      if (key === Symbol.iterator) return function* () {};
      if (key === Symbol.toPrimitive) return () => "";
      if (key === "dispose") return () => {};
      if (key === "length") return 0;
      if (key === "event") return () => new Disposable();
      return anything();
    },
    apply() { return anything(); },
    construct() { return anything(); },
  });
}

const noEvent = () => new Disposable();
const config = (section) => ({
  get(key, dflt) {
    const full = section ? `${section}.${key}` : key;
    return Object.prototype.hasOwnProperty.call(settings, full) ? settings[full] : dflt;
  },
  has(key) { return Object.prototype.hasOwnProperty.call(settings, section ? `${section}.${key}` : key); },
  inspect() { return undefined; },
  update() { return Promise.resolve(); },
});
const outputChannel = () => ({
  name: "Tile", append() {}, appendLine() {}, replace() {}, clear() {}, show() {}, hide() {},
  dispose() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {},
  logLevel: 0, onDidChangeLogLevel: noEvent,
});

const vscodeStub = new Proxy({
  version: "1.95.0",
  env: new Proxy({ appName: "VS Code (test harness)", language: "en", machineId: "harness",
                   sessionId: "harness", uriScheme: "vscode" },
                 { get: (t, k) => (k in t ? t[k] : anything()) }),
  Disposable,
  EventEmitter,
  CancellationTokenSource: class {
    constructor() { this.token = { isCancellationRequested: false, onCancellationRequested: noEvent }; }
    cancel() { this.token.isCancellationRequested = true; }
    dispose() {}
  },
  workspace: new Proxy({
    getConfiguration: config,
    onDidChangeConfiguration: noEvent,
    onDidOpenTextDocument: noEvent,
    onDidChangeTextDocument: noEvent,
    onDidCloseTextDocument: noEvent,
    onDidSaveTextDocument: noEvent,
    onWillSaveTextDocument: noEvent,
    onDidChangeWorkspaceFolders: noEvent,
    onDidCreateFiles: noEvent, onDidRenameFiles: noEvent, onDidDeleteFiles: noEvent,
    onWillCreateFiles: noEvent, onWillRenameFiles: noEvent, onWillDeleteFiles: noEvent,
    onDidOpenNotebookDocument: noEvent, onDidChangeNotebookDocument: noEvent,
    onDidSaveNotebookDocument: noEvent, onDidCloseNotebookDocument: noEvent,
    textDocuments: [],
    notebookDocuments: [],
    workspaceFolders: undefined,
  }, { get: (t, k) => (k in t ? t[k] : anything()) }),
  window: new Proxy({
    createOutputChannel: outputChannel,
    showErrorMessage: (msg) => { errors.push(String(msg)); return Promise.resolve(undefined); },
    showWarningMessage: (msg) => { errors.push(String(msg)); return Promise.resolve(undefined); },
    showInformationMessage: () => Promise.resolve(undefined),
    visibleTextEditors: [],
    onDidChangeVisibleTextEditors: noEvent,
    onDidChangeActiveTextEditor: noEvent,
  }, { get: (t, k) => (k in t ? t[k] : anything()) }),
}, { get: (t, k) => (k in t ? t[k] : anything()) });

const realLoad = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === "vscode") return vscodeStub;
  return realLoad.call(this, request, parent, isMain);
};

async function main() {
  const ext = require(path.join(extDir, "extension.js"));
  const context = { subscriptions: [], extensionPath: extDir };
  let client;
  try {
    client = await ext.activate(context);
  } catch (err) {
    process.stdout.write(JSON.stringify({ failed: String(err && err.message || err), errors }) + "\n");
    return;
  }
  const result = client.initializeResult || {};
  let stopped = false;
  try {
    await ext.deactivate();
    stopped = true;
  } catch (err) {
    errors.push(`stop: ${err}`);
  }
  process.stdout.write(JSON.stringify({
    started: true, serverInfo: result.serverInfo || null,
    capabilities: Object.keys(result.capabilities || {}).sort(), errors, stopped,
  }) + "\n");
}

main().then(() => process.exit(0), (err) => {
  process.stdout.write(JSON.stringify({ failed: `harness: ${err && err.stack || err}` }) + "\n");
  process.exit(1);
});
