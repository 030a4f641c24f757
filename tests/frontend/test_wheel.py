"""The grammar and the standard library ship inside the wheel and are loaded from the
installed package, not from the source tree."""

import pathlib
import subprocess
import sys
import venv
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_ships_grammar_and_parses_outside_the_tree(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, timeout=300,
                   capture_output=True)
    (wheel,) = wheels.glob("tilec-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tilelang/grammar/tile.lark" in names
    assert "tilelang/stdlib/std/math.tile" in names

    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    py = env_dir / "bin" / "python"
    # Install with the outer pip, into the venv, without dependencies (they are visible
    # through the system site-packages).
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site,
                    str(wheel)], check=True, timeout=300, capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    example = (ROOT / "examples" / "softmax.tile").read_text()
    (work / "softmax.tile").write_text(example)
    script = (
        "import tilelang, pathlib\n"
        "from tilelang.frontend.parser import parse, grammar_text\n"
        "m = parse(pathlib.Path('softmax.tile').read_text(), 'softmax.tile')\n"
        "print(tilelang.__file__)\n"
        "print(m.items[0].name)\n"
        "print(len(grammar_text()) > 1000)\n")
    r = subprocess.run([str(py), "-I", "-c", script], cwd=work, capture_output=True, text=True,
                       timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    where, name, has_grammar = r.stdout.split()
    assert where.startswith(site), where  # the installed copy, not the source tree
    assert name == "softmax_rows" and has_grammar == "True"
