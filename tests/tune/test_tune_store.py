"""The disk store of tuning results: keys, damage detection, folder rules, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import warnings

import pytest

from tilelang.tune.store import TuneStore, entry_key

MATERIAL = {"compiler": "tilec 0.1.0 (code 0123)", "sources": [["k.tile", "ab" * 32]],
            "kernel": "matmul", "consts": {}, "configs": [{"BM": 64}, {"BM": 128}],
            "options": {"target": "sm_90a"}, "backend": "cuda",
            "key": {"arrays": {"a": ["f16", [4096, 4096]]}, "scalars": {},
                    "device": "NVIDIA H200 sm_90", "target": "sm_90a"}, "check": None}
RESULT = {"kernel": "matmul", "config": {"BM": 128}, "metric": "ms", "trials": []}


def _quiet_load(store, material):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = store.load(material)
    return got, [str(x.message) for x in w]


def test_round_trip_and_layout(tmp_path):
    s = TuneStore(str(tmp_path / "c"))
    assert s.load(MATERIAL) is None
    assert s.store(MATERIAL, RESULT)
    assert s.load(MATERIAL) == RESULT
    key = entry_key(MATERIAL)
    path = tmp_path / "c" / "tune" / key[:2] / f"{key}.json"
    assert path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for d in (tmp_path / "c", tmp_path / "c" / "tune", path.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    d = json.loads(path.read_text())
    assert d["key"] == key and json.loads(d["body"])["material"] == MATERIAL


@pytest.mark.parametrize("part, value", [
    ("compiler", "tilec 0.1.0 (code 4567)"),
    ("sources", [["k.tile", "cd" * 32]]),
    ("kernel", "matmul2"),
    ("consts", {"BK": 32}),
    ("configs", [{"BM": 64}]),
    ("options", {"target": "sm_80"}),
    ("backend", "emulator"),
])
def test_every_part_of_the_material_is_in_the_key(tmp_path, part, value):
    s = TuneStore(str(tmp_path))
    s.store(MATERIAL, RESULT)
    other = {**MATERIAL, part: value}
    assert entry_key(other) != entry_key(MATERIAL)
    assert s.load(other) is None


@pytest.mark.parametrize("part, value", [
    ("arrays", {"a": ["f16", [4096, 2048]]}),
    ("arrays", {"a": ["bf16", [4096, 4096]]}),
    ("device", "NVIDIA H100 80GB HBM3 sm_90"),
    ("scalars", {"n": 7}),
])
def test_launch_key_parts_change_the_key(tmp_path, part, value):
    s = TuneStore(str(tmp_path))
    s.store(MATERIAL, RESULT)
    other = {**MATERIAL, "key": {**MATERIAL["key"], part: value}}
    assert s.load(other) is None


def _entry(tmp_path, material=MATERIAL):
    key = entry_key(material)
    return tmp_path / "tune" / key[:2] / f"{key}.json"


def _edit_body(d):
    body = json.loads(d["body"])
    body["result"]["config"] = {"BM": 64}
    d["body"] = json.dumps(body, sort_keys=True)
    return d


def _reseal_with_sha(d):
    import hashlib
    d = _edit_body(d)
    d["sha256"] = hashlib.sha256(d["body"].encode()).hexdigest()   # no seal key: seal stale
    return d


@pytest.mark.parametrize("damage", [
    lambda p: p.write_text("{not json"),
    lambda p: p.write_bytes(b""),
    lambda p: p.write_text(json.dumps(_edit_body(json.loads(p.read_text())))),
    lambda p: p.write_text(json.dumps(_reseal_with_sha(json.loads(p.read_text())))),
    lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "format": 99})),
    lambda p: p.write_text(json.dumps([1, 2])),
], ids=["garbage", "empty", "edited", "edited-resummed", "format", "not-an-object"])
def test_damaged_entries_are_removed_and_missed(tmp_path, damage):
    s = TuneStore(str(tmp_path))
    s.store(MATERIAL, RESULT)
    path = _entry(tmp_path)
    damage(path)
    got, warned = _quiet_load(TuneStore(str(tmp_path)), MATERIAL)
    assert got is None
    assert any("damaged tuning result" in w for w in warned)
    assert not path.exists()
    assert s.store(MATERIAL, RESULT)           # rebuilt
    assert TuneStore(str(tmp_path)).load(MATERIAL) == RESULT


def test_an_entry_moved_under_another_key_fails(tmp_path):
    s = TuneStore(str(tmp_path))
    other = {**MATERIAL, "kernel": "other"}
    s.store(other, {**RESULT, "config": {"BM": 64}})
    src, dst = _entry(tmp_path, other), _entry(tmp_path)
    dst.parent.mkdir(mode=0o700, exist_ok=True)
    os.replace(src, dst)
    got, warned = _quiet_load(s, MATERIAL)
    assert got is None and warned


def test_an_entry_from_another_cache_fails_its_seal(tmp_path):
    a, b = TuneStore(str(tmp_path / "a")), TuneStore(str(tmp_path / "b"))
    a.store(MATERIAL, RESULT)
    b.store({**MATERIAL, "kernel": "x"}, RESULT)      # b has its own seal key
    dst = _entry(tmp_path / "b")
    dst.parent.mkdir(mode=0o700, exist_ok=True)
    dst.write_bytes(_entry(tmp_path / "a").read_bytes())
    got, warned = _quiet_load(b, MATERIAL)
    assert got is None and warned


def test_a_link_is_never_followed(tmp_path):
    s = TuneStore(str(tmp_path))
    s.store(MATERIAL, RESULT)
    path = _entry(tmp_path)
    target = tmp_path / "elsewhere.json"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)
    got, _ = _quiet_load(s, MATERIAL)
    assert got is None
    assert target.exists()                          # the link went, not what it points at
    assert not path.is_symlink()


def test_a_folder_writable_by_others_is_not_used(tmp_path):
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = TuneStore(str(root))
        assert not s.store(MATERIAL, RESULT)
        assert s.load(MATERIAL) is None
    assert any("writable by other users" in str(x.message) for x in w)
    assert not (root / "tune").exists()


def test_clear(tmp_path):
    s = TuneStore(str(tmp_path))
    s.store(MATERIAL, RESULT)
    s.store({**MATERIAL, "kernel": "b"}, RESULT)
    assert s.clear() == 2
    assert s.load(MATERIAL) is None


def _writer(root: str, n: int, seed: int) -> int:
    s = TuneStore(root)
    bad = 0
    for i in range(n):
        s.store(MATERIAL, {**RESULT, "config": {"BM": 64 * (1 + (seed + i) % 4)}})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = s.load(MATERIAL)
        if got is None or got["config"]["BM"] not in (64, 128, 192, 256):
            bad += 1
    return bad


def test_concurrent_writers_leave_a_whole_entry(tmp_path):
    root = str(tmp_path / "c")
    TuneStore(root).store(MATERIAL, RESULT)          # the seal key exists before the race
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        bad = pool.starmap(_writer, [(root, 40, k) for k in range(4)])
    assert bad == [0, 0, 0, 0]
    got = TuneStore(root).load(MATERIAL)
    assert got["config"]["BM"] in (64, 128, 192, 256)
    shard = os.path.dirname(TuneStore(root).path(entry_key(MATERIAL)))
    assert os.listdir(shard) == [entry_key(MATERIAL) + ".json"]   # no temporary file left


def test_tilec_cache_clear_removes_tuning_results(tmp_path, capsys):
    from tilelang.cli import main
    s = TuneStore(str(tmp_path))
    s.store(MATERIAL, RESULT)
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert not (tmp_path / "tune").exists()
    assert s.load(MATERIAL) is None
