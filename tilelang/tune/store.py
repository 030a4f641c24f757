"""Tuning results on disk, under the kernel cache's folder (runtime/cache.py):

    tune/<k[:2]>/<k>.json      one tuned (kernel, configurations, launch key, device)

`k` is the SHA-256 of the entry's *material*: the device, the compiler id (tilec's version and
code digest), the module's sources (path and SHA-256 of it and of everything it imports), the
kernel, the const values not tuned, the configurations, the launch key and the options. The
file holds that material, the result, the SHA-256 of both and an HMAC seal under the cache's
`seal.key`, so an entry edited, planted or moved under another key fails its check; a failed
check (or unreadable JSON) is a miss: the entry is removed and the kernel tuned again.

The cache's rules hold here too: the folders are private (0700, ours, no links), files are
opened without following links and must be regular, an entry is written next to its place and
renamed into place (tilelang/atomic_file.py), so concurrent writers each replace the whole file and readers see one whole entry.
Only JSON is read; nothing is unpickled.
"""

from __future__ import annotations

import hmac
import json
import os
import stat

from tilelang.runtime import cache as cache_mod
from tilelang.runtime.cache import Damaged, DiskCache, _unlink_ours

FORMAT = 1
_LIMIT = 16 << 20                 # bytes; a bigger entry is damage, not a tuning result
STATS = {"hits": 0, "writes": 0, "corrupt": 0}


def entry_key(material: dict) -> str:
    return cache_mod.digest({"kind": "tilelang-tune", "format": FORMAT, **material})


class TuneStore:
    """Tuning results in `root/tune/` (root: `TILELANG_CACHE_DIR`, else ~/.cache/tilelang)."""

    def __init__(self, root: str | None = None):
        self.cache = DiskCache(root)
        self.root = self.cache.root

    def path(self, key: str) -> str:
        return os.path.join(self.root, "tune", key[:2], key + ".json")

    def _seal(self, secret: bytes, key: str, sha: str) -> str:
        return hmac.new(secret, f"tilelang-tune-{FORMAT}\n{key}\n{sha}".encode(),
                        "sha256").hexdigest()

    def load(self, material: dict) -> dict | None:
        """The stored result for `material`, or None (a damaged entry is removed)."""
        key = entry_key(material)
        if self.cache._folder("tune", key[:2], create=False) is None:
            return None
        path = self.path(key)
        try:
            os.lstat(path)
        except OSError:
            return None
        try:
            secret = self.cache._key(create=False)
            body = cache_mod.read_sealed_record(
                path, _LIMIT, FORMAT, key, "body", "a tuning result",
                lambda sha: self._seal(secret, key, sha) if secret is not None else None)
            try:
                b = json.loads(body)
            except (ValueError, RecursionError):
                raise Damaged("body is not valid JSON") from None
            if not isinstance(b, dict) or entry_key(b.get("material", {})) != key or \
                    not isinstance(b.get("result"), dict):
                raise Damaged("the entry's material is not its key's")
        except Damaged as e:
            STATS["corrupt"] += 1
            cache_mod._warn(f"tilelang: a damaged tuning result in {self.root} ({e}); it is "
                            "removed and the kernel tuned again")
            _unlink_ours(path)
            return None
        STATS["hits"] += 1
        return b["result"]

    def store(self, material: dict, result: dict) -> bool:
        """Write the result (atomically); False when the cache folder cannot be used."""
        key = entry_key(material)
        shard = self.cache._folder("tune", key[:2], create=True)
        secret = self.cache._key(create=True) if shard else None
        if secret is None:
            return False
        body = json.dumps({"material": material, "result": result}, sort_keys=True)
        sha = cache_mod.sha256_hex(body)
        data = json.dumps({"format": FORMAT, "key": key, "sha256": sha,
                           "seal": self._seal(secret, key, sha), "body": body})
        if not self.cache.write_record(self.path(key), data.encode("utf-8"), fsync=True):
            return False
        STATS["writes"] += 1
        return True

    def clear(self) -> int:
        """Remove every tuning result; the number removed."""
        top = self.cache._folder("tune", create=False)
        if top is None:
            return 0
        n = 0
        for shard in sorted(os.listdir(top)):
            d = os.path.join(top, shard)
            try:
                names = os.listdir(d) if stat.S_ISDIR(os.lstat(d).st_mode) else []
            except OSError:
                continue
            for name in names:
                if name.endswith(".json") and _unlink_ours(os.path.join(d, name)):
                    n += 1
        return n
