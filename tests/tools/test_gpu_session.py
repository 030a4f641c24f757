"""tools/gpu_session.sh without a GPU: its command line, and the `all` phase's packing into at
most 8 files with every step stubbed (a fake python3 and nvidia-smi on PATH), one of them
hanging past its box. tools/pytest_test_alarm.py: a test past its limit fails, the next runs."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import textwrap
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu_session.sh"


def run(args, cwd, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("OUT", None)
    e.update(env or {})
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    ([], "usage: bash tools/gpu_session.sh all|env|tests|bench|tools"),
    (["nope"], "usage: bash tools/gpu_session.sh all|env|tests|bench|tools"),
    (["all", "9x"], "gpu_session: SECONDS must be a whole number"),
    (["all", "300", "extra"], "gpu_session: all takes no ARGS"),
    (["digest", "x"], "usage: bash tools/gpu_session.sh digest"),
])
def test_command_line_errors_exit_2(tmp_path, args, message):
    p = run(args, tmp_path)
    assert p.returncode == 2
    assert message in p.stderr
    assert p.stdout == ""
    assert not (tmp_path / "gpu-session-out").exists()      # nothing written


def test_digest_follows_the_sources(tmp_path):
    (tmp_path / "tilelang").mkdir()
    src = tmp_path / "tilelang" / "a.py"
    src.write_text("x = 1\n")
    first = run(["digest"], tmp_path).stdout.strip()
    assert len(first) == 16 and int(first, 16) >= 0
    assert run(["digest"], tmp_path).stdout.strip() == first
    (tmp_path / "tilelang" / "__pycache__").mkdir()
    (tmp_path / "tilelang" / "__pycache__" / "b.py").write_text("junk")
    assert run(["digest"], tmp_path).stdout.strip() == first     # byte code is not a source
    src.write_text("x = 2\n")
    assert run(["digest"], tmp_path).stdout.strip() != first


FAKE_PYTHON = r"""#!/usr/bin/env bash
# stands in for python3: each step of the all phase, by its arguments
case "$*" in
  *getsitepackages*) echo "$FAKE_SP" ;;
  -c*) echo "imports ok" ;;
  *gpu_env.py*) echo '{"driver": "fake"}' >"$2"; echo env ;;
  *"-m pytest"*)
    for a in "$@"; do case "$a" in --junitxml=*) echo '<testsuites/>' >"${a#*=}";; esac; done
    echo "$*" >"$FAKE_SP/pytest-args"
    echo "tests/a.py::test_one PASSED"; echo "tests/a.py::test_two FAILED"; exit 1 ;;
  *"--only attention"*) exec sleep 300 ;;
  *benchmarks/run.py*)
    fam=$3; dir=$6
    mkdir -p "$dir"; echo "| $fam |" >>"$dir/2026-01-01-fake.md"
    echo plot >"$dir/2026-01-01-fake-$fam.png" ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


@pytest.mark.slow
def test_all_packs_at_most_8_files_when_a_step_hangs(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text(FAKE_PYTHON)
    (bin_ / "nvidia-smi").write_text("#!/usr/bin/env bash\necho 'Driver Version: 0.0'\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    sp, out, work = tmp_path / "sp", tmp_path / "out", tmp_path / "work"
    for d in (sp, out, work):
        d.mkdir()
    # a budget of 50 s: about 25 s for the boxes after set-up, env and packing; attention's
    # share (17 of the 37 left to weigh: about 7 s) ends the hanging step, and the later
    # ones still run
    p = run(["all", "50"], work, {"PATH": f"{bin_}:{os.environ['PATH']}", "OUT": str(out),
                                    "FAKE_SP": str(sp), "GPU_COMMIT": "abc123",
                                    "GPU_SITE": str(tmp_path / "site"),
                                    "TMPDIR": str(tmp_path)}, timeout=150)
    files = sorted(f.name for f in out.iterdir())
    assert all((out / f).is_file() for f in files) and len(files) <= 8
    assert files == ["all-2026-01-01-fake.md", "all-env.json", "all-junit.xml",
                     "all-outcomes.txt", "all-summary.txt", "all.tar.gz"]
    summary = (out / "all-summary.txt").read_text()
    assert "commit abc123" in summary.splitlines()[0]
    lines = {ln.split()[1]: ln for ln in summary.splitlines()
             if ln.startswith(("ok ", "FAIL "))}
    assert list(lines) == ["setup", "env-record", "nvidia-smi", "pytest-gpu", "bench-matmul",
                           "bench-attention", "bench-memory", "bench-launch"]
    assert "TIMEOUT" in lines["bench-attention"]
    assert "FAILED rc=1" in lines["pytest-gpu"]
    assert lines["bench-memory"].startswith("ok ") and lines["bench-launch"].startswith("ok ")
    assert "outcomes: 1 FAILED 1 PASSED" in summary
    # the per-test limit and the deadline that lets pytest end in its box: the alarm plugin
    assert re.search(r"-p pytest_test_alarm --test-alarm=60 --test-deadline=\d{10}$",
                     (sp / "pytest-args").read_text().strip())
    assert (out / "all-2026-01-01-fake.md").read_text() == "| matmul |\n| memory |\n| launch |\n"
    assert p.returncode == 0


def test_alarm_fails_a_slow_test_and_runs_the_next(tmp_path):
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        import time
        def test_slow():
            time.sleep(30)
        def test_after():
            pass
    """))
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'tools'}")
    p = subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "pytest_test_alarm", "--test-alarm=0.5", "test_x.py"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "test_x.py::test_slow: call ran past --test-alarm=0.5 s" in p.stdout
    assert "1 failed, 1 passed" in p.stdout


def test_deadline_skips_what_it_stops_and_what_would_start_after_it(tmp_path):
    (tmp_path / "test_y.py").write_text(textwrap.dedent("""
        import time
        def test_first():
            time.sleep(30)
        def test_second():
            pass
    """))
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'tools'}")
    deadline = time.time() + 4        # pytest's start-up takes about 1 s of it
    p = subprocess.run(["python3", "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p",
                        "pytest_test_alarm", "--test-alarm=60", f"--test-deadline={deadline}",
                        "test_y.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout
    assert re.search(r"stopped after \d+ s at --test-deadline \(no time left\)", p.stdout)
    assert "no time left before --test-deadline" in p.stdout
    assert "2 skipped" in p.stdout and "failed" not in p.stdout
