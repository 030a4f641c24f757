"""The README's set-up, as a new user runs it: a fresh clone of the committed HEAD, a new virtual
environment (no system site packages: everything comes from pip, through whatever index or
mirror pip is configured with), then the README's own commands — read from README.md, so the
test follows the README — each ending with status 0, the first with a cubin in the clone.

About as long as the whole suite (the second command runs it): `slow`, with `-m slow`."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SH = re.compile(r"^```sh[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def setup_commands() -> list[str]:
    """The ```sh blocks of the README's "Set up" section, in order."""
    text = (ROOT / "README.md").read_text("utf-8")
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in SH.findall(section)]


def test_the_readme_says_venv_install_compile_test():
    venv, install, tests = setup_commands()
    assert venv.startswith("python3 -m venv ") and "activate" in venv
    assert "tilec examples/vadd.tile" in install and "pip install" in install
    assert "python3 -m pytest" in tests and ".[test]" in tests


@pytest.mark.slow
def test_readme_commands_in_a_fresh_venv(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout to clone")
    clone = tmp_path / "tile"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)],
                   check=True, timeout=300)
    venv, install, tests = setup_commands()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "TILELANG_BACKEND",
                        "TILELANG_CACHE_DIR", "PYTHONNOUSERSITE")}
    env["TILELANG_CACHE_DIR"] = str(tmp_path / "cache")     # not the user's cache

    def sh(command: str, timeout: int) -> subprocess.CompletedProcess:
        # the README's activation line first: each command runs as a user's shell would
        script = f"set -e\n{venv}\n{command}\n"
        return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True,
                               text=True, timeout=timeout)

    first = sh(install, 1800)
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    cubin = clone / "vadd.cubin"
    assert cubin.is_file() and cubin.read_bytes()[:4] == b"\x7fELF"
    # the venv is its own: no system site packages
    cfg = (clone / ".venv" / "pyvenv.cfg").read_text()
    assert re.search(r"include-system-site-packages\s*=\s*false", cfg)
    second = sh(tests, 3600)
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    assert re.search(r"\d+ passed", second.stdout)
