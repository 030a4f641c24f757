"""Packaging: the sdist holds the project (tests, docs, examples, editors, benchmarks, grammar,
stdlib); the wheel built from it ships the grammar, its tables and the standard library inside
`tilelang/`; a wheel installed in a fresh virtual environment and an editable install both find
them and import `std.math`.

These tests work whether the suite runs with the system Python or inside a virtual environment:
the fresh environments see the outer interpreter's packages through a `.pth` file, not through
`--system-site-packages` (which would skip a virtual environment's own packages)."""

from __future__ import annotations

import os
import pathlib
import shutil
import site
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "node_modules", "__pycache__",
                              ".hypothesis", ".pytest_cache", ".venv", "*.cubin")
BUILD = ("import sys; from setuptools import build_meta as b\n"
         "print(getattr(b, sys.argv[1])(sys.argv[2]))\n")

# Checks `std.math` through the import machinery, the shipped tables and the example parse.
PROBE = """
import pathlib, tilelang
from tilelang.driver import check_source
from tilelang.frontend.parser import _lark, parse
from tilelang.frontend.resources import grammar_dir, stdlib_dir
m = parse(pathlib.Path('softmax.tile').read_text(), 'softmax.tile')
r = check_source('from std.math import gelu;\\n'
                 'kernel k(a: Array[f32, 1]) {\\n'
                 '    let t = load(a, index = (0,), shape = (64,), padding = 0.0);\\n'
                 '    store(a, index = (0,), tile = gelu(t));\\n}\\n', 'k.tile')
print(tilelang.__file__)
print(grammar_dir())
print(stdlib_dir())
print(m.items[0].name, r.ok, _lark().source_path)
"""


def copy_tree(dest: pathlib.Path) -> pathlib.Path:
    """The project as a user's checkout holds it (no build outputs, no node_modules)."""
    shutil.copytree(ROOT, dest, ignore=SKIP, symlinks=True)
    return dest


def build(kind: str, src: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    r = subprocess.run([sys.executable, "-c", BUILD, kind, str(out)], cwd=src,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out / r.stdout.strip().splitlines()[-1]


def outer_site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs += [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def fresh_venv(where: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A new virtual environment that sees this interpreter's packages (numpy, lark, ...) after
    its own, as plain path entries (their .pth files, an editable tilec's among them, are not
    run)."""
    venv.create(where, with_pip=False)
    py = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(py), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (pathlib.Path(purelib) / "zz_outer_site.pth").write_text("\n".join(outer_site_dirs()) + "\n")
    return py, pathlib.Path(purelib)


def probe(py: pathlib.Path, home: pathlib.Path) -> list[str]:
    work = home / "elsewhere"
    work.mkdir()
    (work / "softmax.tile").write_text((ROOT / "examples" / "softmax.tile").read_text())
    r = subprocess.run([str(py), "-I", "-c", PROBE], cwd=work, capture_output=True, text=True,
                       timeout=120, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                         "HOME": str(home)})
    assert r.returncode == 0, r.stderr
    return r.stdout.split("\n")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> pathlib.Path:
    tmp = tmp_path_factory.mktemp("sdist")
    return build("build_sdist", copy_tree(tmp / "src"), tmp / "dist")


@pytest.mark.slow
def test_sdist_holds_the_project(sdist):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for wanted in ("README.md", "LICENSE", "pyproject.toml", "setup.py", "MANIFEST.in",
                   "grammar/tile.lark", "grammar/tile.tables.json", "stdlib/std/math.tile",
                   "tilelang/frontend/parser.py", "tests/frontend/test_wheel.py",
                   "tests/conftest.py", "docs/language.md", "docs/python-api.md",
                   "examples/vadd.tile", "editors/README.md", "editors/generate.py",
                   "benchmarks/results/launch-overhead-2026-11-22-cpu.md",
                   "tools/gpu_session.sh"):
        assert wanted in names, wanted
    for top in ("tests", "docs", "examples", "editors", "benchmarks", "tools"):
        tracked = {str(p.relative_to(ROOT)) for p in (ROOT / top).rglob("*")
                   if p.is_file() and not SKIP(str(p.parent), [p.name])
                   and not any(part in ("node_modules", "__pycache__") for part in p.parts)}
        tracked = {t for t in tracked if not t.endswith(".pyc")}
        missing = tracked - names
        assert not missing, sorted(missing)[:10]
    assert not [n for n in names if "__pycache__" in n or "node_modules" in n or
                n.endswith((".pyc", ".cubin"))]


@pytest.mark.slow
def test_wheel_from_the_sdist_installs_into_a_fresh_venv(sdist, tmp_path):
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    (src,) = (tmp_path / "unpacked").iterdir()
    wheel = build("build_wheel", src, tmp_path / "wheels")
    names = set(zipfile.ZipFile(wheel).namelist())
    for wanted in ("tilelang/grammar/tile.lark", "tilelang/grammar/tile.tables.json",
                   "tilelang/stdlib/std/math.tile", "tilelang/py.typed",
                   "tilelang/frontend/parser.py"):
        assert wanted in names, wanted
    tops = {n.split("/")[0] for n in names}
    assert tops == {"tilelang", wheel.name.split("-")[0] + "-" +
                    wheel.name.split("-")[1] + ".dist-info"}, tops  # no grammar/, tests/, ...

    py, purelib = fresh_venv(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(purelib), str(wheel)], check=True, timeout=300, capture_output=True)
    where, gdir, sdir, result, _ = probe(py, tmp_path)
    assert where.startswith(str(purelib)), where  # the installed copy, not the source tree
    assert gdir == str(purelib / "tilelang" / "grammar")
    assert sdir == str(purelib / "tilelang" / "stdlib")
    assert result == "softmax_rows True <deserialized>"


@pytest.mark.slow
def test_editable_install_finds_grammar_and_stdlib_at_the_top(tmp_path):
    src = copy_tree(tmp_path / "checkout")
    py, _ = fresh_venv(tmp_path / "venv")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                        "--no-deps", "--no-build-isolation", "-e", str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    where, gdir, sdir, result, _ = probe(py, tmp_path)
    assert where == str(src / "tilelang" / "__init__.py")
    assert gdir == str(src / "grammar") and sdir == str(src / "stdlib")
    assert result == "softmax_rows True <deserialized>"
