// The Tile extension's client: starts the language server (`tilec lsp` unless the settings
// name another command) over stdio with vscode-languageclient, for every `tile` document.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

/** The server's command and arguments from the `tile.server.*` settings. */
function serverCommand() {
  const config = vscode.workspace.getConfiguration("tile");
  const command = config.get("server.command") || "tilec";
  const args = config.get("server.args");
  return { command, args: Array.isArray(args) ? args : ["lsp"] };
}

async function activate(context) {
  const { command, args } = serverCommand();
  const serverOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "tile" },
      { scheme: "untitled", language: "tile" },
    ],
  };
  client = new LanguageClient("tile", "Tile language server", serverOptions, clientOptions);
  context.subscriptions.push({ dispose: () => client && client.stop() });
  try {
    await client.start();
  } catch (err) {
    // A missing `tilec` is the usual cause: say which command failed and where to set it.
    vscode.window.showErrorMessage(
      `Tile: could not start the language server \`${[command, ...args].join(" ")}\` ` +
        `(${err && err.message ? err.message : err}). Install tilec with the lsp extra ` +
        "(pip install 'tilec[lsp]') or set `tile.server.command`.");
    throw err;
  }
  return client;
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate, serverCommand };
