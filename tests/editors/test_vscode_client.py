"""The VS Code extension's language client, without VS Code: its own `activate()` runs in Node
with a stand-in `vscode` module (vscode_client_harness.js) and the real vscode-languageclient
from editors/vscode/node_modules; it must spawn the configured command and complete an LSP
initialize with the real server. Also: the `.vsix` builds and its packaged client does the
same, and the problem matcher reads `tilec`'s diagnostics."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from editor_helpers import EDITORS, ROOT

VSCODE = EDITORS / "vscode"
HARNESS = ROOT / "tests" / "editors" / "vscode_client_harness.js"


@pytest.fixture(scope="module")
def extension_modules():
    """editors/vscode/node_modules installed from the lock file (`npm ci` once)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node/npm not available: cannot run the VS Code extension's client")
    modules = VSCODE / "node_modules"
    if not all((modules / m).is_dir() for m in ("vscode-languageclient", "@vscode/vsce")):
        proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                              cwd=VSCODE, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.skip(f"npm ci failed in {VSCODE} (no registry access?): "
                        f"{proc.stderr.strip()[-500:]}")
    return modules


def fake_server(folder, name: str = "tile-server"):
    """An executable that records its arguments, then runs this checkout's `tilec`."""
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / f"{name}.args"
    script = folder / name
    script.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$@\" > '{record}'\n"
        f"cd '{ROOT}' && exec '{sys.executable}' -m tilelang.cli \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, record


def activate(ext_dir, settings: dict, env: dict | None = None) -> dict:
    proc = subprocess.run(["node", str(HARNESS), str(ext_dir), json.dumps(settings)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_activate_starts_the_configured_server(extension_modules, tmp_path):
    script, record = fake_server(tmp_path)
    got = activate(VSCODE, {"tile.server.command": str(script), "tile.server.args": ["lsp"]})
    assert got.get("started") is True, got
    assert got["serverInfo"]["name"] == "tilec-lsp"
    for cap in ("completionProvider", "hoverProvider", "signatureHelpProvider",
                "referencesProvider", "renameProvider", "semanticTokensProvider",
                "inlayHintProvider", "codeActionProvider", "documentFormattingProvider",
                "foldingRangeProvider", "definitionProvider"):
        assert cap in got["capabilities"], cap
    assert got["errors"] == [] and got["stopped"] is True
    assert record.read_text().split() == ["lsp", "--stdio"]


def test_the_default_command_is_tilec_on_path(extension_modules, tmp_path):
    _, record = fake_server(tmp_path / "bin", "tilec")
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    got = activate(VSCODE, {}, env={"PATH": path})
    assert got.get("started") is True, got
    assert record.read_text().split() == ["lsp", "--stdio"]


def test_a_missing_server_is_a_clear_message(extension_modules, tmp_path):
    missing = str(tmp_path / "no-such-tilec")
    got = activate(VSCODE, {"tile.server.command": missing})
    assert "failed" in got and "ENOENT" in got["failed"]
    (msg,) = [e for e in got["errors"] if e.startswith("Tile:")]
    assert f"`{missing} lsp`" in msg and "`tile.server.command`" in msg


def test_the_vsix_builds_and_its_client_starts_the_server(extension_modules, tmp_path):
    proc = subprocess.run(["npx", "--no-install", "vsce", "package", "-o",
                           str(tmp_path / "tile.vsix")], cwd=VSCODE, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(tmp_path / "tile.vsix") as z:
        names = set(z.namelist())
        for need in ("extension/package.json", "extension/extension.js",
                     "extension/syntaxes/tile.tmLanguage.json", "extension/snippets/tile.json",
                     "extension/language-configuration.json", "extension.vsixmanifest",
                     "extension/node_modules/vscode-languageclient/node.js"):
            assert need in names, need
        assert not any("/@vscode/vsce/" in n for n in names)  # no dev dependencies
        z.extractall(tmp_path / "unpacked")
    script, record = fake_server(tmp_path / "bin")
    got = activate(tmp_path / "unpacked" / "extension", {"tile.server.command": str(script)})
    assert got.get("started") is True and got["serverInfo"]["name"] == "tilec-lsp", got


def _js_regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)  # the matcher's patterns use no syntax Python reads otherwise


def test_problem_matcher_reads_tilec_output(tmp_path, capsys):
    pkg = json.loads((VSCODE / "package.json").read_text())
    assert pkg["main"] == "./extension.js" and pkg["activationEvents"] == ["onLanguage:tile"]
    props = pkg["contributes"]["configuration"]["properties"]
    assert props["tile.server.command"]["default"] == "tilec"
    assert props["tile.server.args"]["default"] == ["lsp"]
    assert "vscode-languageclient" in pkg["dependencies"]
    (matcher,) = pkg["contributes"]["problemMatchers"]
    assert matcher["name"] == "tilec"
    first, second = (_js_regex(p["regexp"]) for p in matcher["pattern"])

    from tilelang.cli import main

    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(a: Array[f32, 1]) {\n    let t = lod(a);\n    let u = 1;\n}\n")
    assert main(["check", str(bad)]) == 1
    lines = capsys.readouterr().err.splitlines()
    found = []
    for k, line in enumerate(lines):
        m = first.match(line)
        if m and k + 1 < len(lines) and second.match(lines[k + 1]):
            loc = second.match(lines[k + 1])
            p0, p1 = matcher["pattern"]
            found.append((m.group(p0["severity"]), m.group(p0["code"]), m.group(p0["message"]),
                          loc.group(p1["file"]), int(loc.group(p1["line"])),
                          int(loc.group(p1["column"]))))
    assert ("error", "E0201", "cannot find `lod` in this scope", str(bad), 2, 13) in found
    assert any(f[0] == "warning" and f[4] == 3 for f in found), found
