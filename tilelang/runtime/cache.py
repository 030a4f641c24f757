"""The on-disk cache of compiled kernels and module signatures.

Layout under `cache_dir()` (`TILELANG_CACHE_DIR`, else `~/.cache/tilelang`):

    kernels/<k[:2]>/<k>/meta.json, kernel.ptx, kernel.cubin   one specialization
    modules/<m[:2]>/<m>.json                                  one module's signature
    locks/<k>.lock                                            build locks (flock)
    tmp/                                                      entries being written

A kernel key hashes everything the output depends on: the compiler's id (tilec, LLVM and
nvJitLink versions), the (path, sha256) of the module and every file it imports, the kernel
name, the const values, the array facts, the target and the options. An entry is written in a
temporary folder and renamed into place, so readers see a whole entry or none; meta.json holds
the sha256 of the PTX and cubin, so a damaged entry is detected, removed and rebuilt. Processes
building the same key take a file lock, so one builds and the others load its entry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from typing import Iterator

from tilelang.codegen.api import AbiParam, ArrayFacts, KernelArtifact

from .compiler import Built
from .signature import ModuleInfo

FORMAT = 1
STATS = {"compiles": 0, "memory_hits": 0, "disk_hits": 0, "disk_writes": 0, "corrupt": 0,
         "inspects": 0, "module_disk_hits": 0}


def reset_stats() -> None:
    for k in STATS:
        STATS[k] = 0


def cache_dir() -> str:
    env = os.environ.get("TILELANG_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".cache", "tilelang")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def digest(obj) -> str:
    """A key from JSON-able data (sorted keys, so dict order never matters)."""
    return sha256_hex(json.dumps(obj, sort_keys=True, default=str))


# ---------------------------------------------------------------------------------------------
# Kernel artifacts as JSON

def artifact_to_json(a: KernelArtifact) -> dict:
    attrs = dataclasses.asdict(a.attrs) if dataclasses.is_dataclass(a.attrs) else None
    return {"name": a.name, "params": [p.to_json() for p in a.params], "block": list(a.block),
            "attrs": attrs, "cluster": list(a.cluster) if a.cluster else None,
            "static_smem": a.static_smem, "dynamic_smem": a.dynamic_smem,
            "facts": {k: v.key() for k, v in a.facts.items()},
            "nonportable_cluster": a.nonportable_cluster}


def artifact_from_json(d: dict) -> KernelArtifact:
    from tilelang.sema.launch_verify import NvvmAttrs
    attrs = None
    if d["attrs"] is not None:
        attrs = NvvmAttrs(**{k: tuple(v) if isinstance(v, list) else v
                             for k, v in d["attrs"].items()})
    return KernelArtifact(
        name=d["name"], params=tuple(AbiParam.from_json(p) for p in d["params"]),
        block=tuple(d["block"]), attrs=attrs,
        cluster=tuple(d["cluster"]) if d["cluster"] else None,
        static_smem=int(d["static_smem"]), dynamic_smem=int(d["dynamic_smem"]),
        facts={k: ArrayFacts.from_key(v) for k, v in d["facts"].items()},
        nonportable_cluster=bool(d["nonportable_cluster"]))


# ---------------------------------------------------------------------------------------------

class DiskCache:
    def __init__(self, root: str | None = None):
        self.root = root or cache_dir()

    # -- paths ------------------------------------------------------------------------------
    def _kernel_dir(self, key: str) -> str:
        return os.path.join(self.root, "kernels", key[:2], key)

    def _module_file(self, key: str) -> str:
        return os.path.join(self.root, "modules", key[:2], key + ".json")

    def _tmp(self) -> str:
        d = os.path.join(self.root, "tmp")
        os.makedirs(d, exist_ok=True)
        return d

    # -- kernels ----------------------------------------------------------------------------
    def load(self, key: str) -> Built | None:
        """The entry for `key`, or None when there is none or it is damaged (then removed)."""
        d = self._kernel_dir(key)
        meta_path = os.path.join(d, "meta.json")
        if not os.path.exists(meta_path):
            return None
        try:
            with open(meta_path, encoding="utf-8") as f:
                meta = json.load(f)
            if meta.get("format") != FORMAT or meta.get("key") != key:
                raise ValueError("format or key mismatch")
            with open(os.path.join(d, "kernel.ptx"), "rb") as f:
                ptx = f.read()
            if sha256_hex(ptx) != meta["ptx_sha256"]:
                raise ValueError("PTX checksum mismatch")
            cubin = None
            if meta.get("cubin_sha256"):
                with open(os.path.join(d, "kernel.cubin"), "rb") as f:
                    cubin = f.read()
                if sha256_hex(cubin) != meta["cubin_sha256"]:
                    raise ValueError("cubin checksum mismatch")
            built = Built(artifact_from_json(meta["artifact"]), ptx.decode("utf-8"), cubin,
                          meta["target"])
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            STATS["corrupt"] += 1
            warnings.warn(f"tilelang: damaged cache entry {d} ({e}); rebuilding it",
                          RuntimeWarning, stacklevel=2)
            self._remove(d)
            return None
        STATS["disk_hits"] += 1
        return built

    def store(self, key: str, built: Built, info: dict) -> None:
        """Write the entry atomically; if another process got there first, keep theirs."""
        final = self._kernel_dir(key)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=key[:16] + ".", dir=self._tmp())
        try:
            ptx = built.ptx.encode("utf-8")
            _write(os.path.join(tmp, "kernel.ptx"), ptx)
            if built.cubin is not None:
                _write(os.path.join(tmp, "kernel.cubin"), built.cubin)
            meta = {"format": FORMAT, "key": key, "target": built.target,
                    "artifact": artifact_to_json(built.artifact),
                    "ptx_sha256": sha256_hex(ptx),
                    "cubin_sha256": sha256_hex(built.cubin) if built.cubin is not None else None,
                    "created": time.time(), **info}
            _write(os.path.join(tmp, "meta.json"),
                   json.dumps(meta, indent=1, sort_keys=True).encode("utf-8"))
            try:
                os.rename(tmp, final)
                tmp = None
                STATS["disk_writes"] += 1
            except OSError:
                # An entry exists: a concurrent writer won (keep it) or it is stale (replace).
                if not os.path.exists(os.path.join(final, "meta.json")) or \
                        self._peek_broken(final):
                    self._remove(final)
                    with contextlib.suppress(OSError):
                        os.rename(tmp, final)
                        tmp = None
                        STATS["disk_writes"] += 1
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def _peek_broken(self, d: str) -> bool:
        try:
            with open(os.path.join(d, "meta.json"), encoding="utf-8") as f:
                meta = json.load(f)
            with open(os.path.join(d, "kernel.ptx"), "rb") as f:
                return sha256_hex(f.read()) != meta["ptx_sha256"]
        except (OSError, ValueError, KeyError):
            return True

    def _remove(self, d: str) -> None:
        """Move aside then delete, so a reader never sees half a folder under the final name."""
        trash = os.path.join(self._tmp(), "trash." + os.path.basename(d) + f".{os.getpid()}."
                             f"{time.monotonic_ns()}")
        try:
            os.rename(d, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    @contextlib.contextmanager
    def lock(self, key: str, timeout: float = 600.0) -> Iterator[None]:
        """Hold the build lock of `key` (an flock; a no-op where flock does not exist)."""
        try:
            import fcntl
        except ImportError:          # pragma: no cover - not POSIX
            yield
            return
        d = os.path.join(self.root, "locks")
        os.makedirs(d, exist_ok=True)
        fd = os.open(os.path.join(d, key + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:   # a stuck holder: build without the lock
                        break
                    time.sleep(0.01)
            yield
        finally:
            os.close(fd)             # closing releases the lock

    # -- module signatures ------------------------------------------------------------------
    def load_module(self, key: str, main_path: str) -> ModuleInfo | None:
        path = self._module_file(key)
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
            if d.get("format") != FORMAT or d.get("sha256") != sha256_hex(d["info"]):
                raise ValueError("damaged")
            info = ModuleInfo.from_json(d["info"])
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError, KeyError, TypeError):
            STATS["corrupt"] += 1
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        for p, sha in info.sources:      # an imported file changed: the signature is stale
            if p == main_path:
                continue
            try:
                with open(p, "rb") as f:
                    if sha256_hex(f.read()) != sha:
                        return None
            except OSError:
                return None
        STATS["module_disk_hits"] += 1
        return info

    def store_module(self, key: str, info: ModuleInfo) -> None:
        path = self._module_file(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        text = info.to_json()
        data = json.dumps({"format": FORMAT, "sha256": sha256_hex(text), "info": text})
        fd, tmp = tempfile.mkstemp(dir=self._tmp(), suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, path)

    # -- maintenance (tilec cache) ----------------------------------------------------------
    def entries(self) -> list[dict]:
        out = []
        base = os.path.join(self.root, "kernels")
        if not os.path.isdir(base):
            return out
        for sub in sorted(os.listdir(base)):
            for key in sorted(os.listdir(os.path.join(base, sub))):
                d = os.path.join(base, sub, key)
                size = _tree_size(d)
                try:
                    with open(os.path.join(d, "meta.json"), encoding="utf-8") as f:
                        meta = json.load(f)
                except (OSError, ValueError):
                    meta = {}
                out.append({"key": key, "path": d, "bytes": size,
                            "kernel": meta.get("kernel", "?"), "source": meta.get("source", "?"),
                            "target": meta.get("target", "?"), "consts": meta.get("consts", {}),
                            "facts": meta.get("facts", {}), "created": meta.get("created")})
        return out

    def size(self) -> int:
        return _tree_size(self.root) if os.path.isdir(self.root) else 0

    def clear(self) -> int:
        """Remove every entry; returns the number of kernel entries removed."""
        n = len(self.entries())
        for sub in ("kernels", "modules", "tmp", "locks"):
            p = os.path.join(self.root, sub)
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
        return n


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _tree_size(root: str) -> int:
    total = 0
    for d, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(d, name))
    return total
