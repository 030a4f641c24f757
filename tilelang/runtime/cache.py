"""The on-disk cache of compiled kernels and module signatures.

Layout under `cache_dir()` (`TILELANG_CACHE_DIR`, else `~/.cache/tilelang`):

    CACHEDIR.TAG                                              the mark of a Tile cache
    seal.key                                                  this cache's secret (0600)
    kernels/<k[:2]>/<k>/meta.json, kernel.ptx, kernel.cubin   one specialization
    modules/<m[:2]>/<m>.json                                  one module's signature
    locks/<k>.lock                                            build locks (flock)
    tmp/                                                      entries being written

A kernel key hashes everything the output depends on: the compiler's id (tilec's own code,
LLVM and nvJitLink versions), the (path, sha256) of the module and every file it imports, the
kernel name, the const values, the array facts, the target and the options.

Only a folder marked as a Tile cache (its CACHEDIR.TAG), an empty one or a cache from before
the mark is used, chmodded or cleared; any other folder is left as it is (docs/cli.md).
What is loaded runs on the GPU, so nothing in the folder is trusted on its word:
- every folder is created 0700 whatever the umask, and on each use the root and the folders
  below it must be real folders (not links) owned by this user and not writable by others;
  otherwise the cache is not used (one warning per folder and process) and kernels compile;
- meta.json records the full key, the size and SHA-256 of every artifact and the SHA-256 of
  its own body, sealed with an HMAC under `seal.key`, so an entry planted or edited by anyone
  who cannot read that key, or moved under another key, fails the check;
- a failed check is a miss: the entry is removed (only when it is ours, never through a link)
  and rebuilt. Files are opened without following links and must be regular files.
A kernel entry is written in a temporary folder and renamed into place, a one-file record (a
module signature, the key, a tuning result) through tilelang/atomic_file.py, so readers see a
whole entry or none. Processes building the same key take a file lock, so one builds and the others load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import hmac
import json
import os
import secrets
import shutil
import stat
import tempfile
import time
import warnings
from typing import Iterator

from tilelang.atomic_file import NotAFile, replace_file
from tilelang.codegen.api import AbiParam, ArrayFacts, KernelArtifact, TensorMapSpec
from tilelang.infile import read_regular

from .artifact_check import artifact_problem
from .compiler import Built
from .signature import ModuleInfo

FORMAT = 2
STATS = {"compiles": 0, "memory_hits": 0, "disk_hits": 0, "disk_writes": 0, "corrupt": 0,
         "inspects": 0, "module_disk_hits": 0}
ARTIFACTS = ("kernel.ptx", "kernel.cubin")
SEAL_FILE = "seal.key"
# The mark of a Tile cache: a cache directory tag (https://bford.info/cachedir/: backup tools
# skip the folder) that also names Tile and the cache's format. Only a folder with this tag (or
# an empty one, or one laid out by a Tile before the tag existed) is used, chmodded or cleared.
MARKER = "CACHEDIR.TAG"
_TAG_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
_MARKER_FORMAT = "tilelang-cache-format:"
MARKER_TEXT = (f"{_TAG_SIGNATURE}\n"
               "# This file is a cache directory tag created by tilelang: this folder is Tile's\n"
               "# kernel cache (docs/cli.md, \"The kernel cache\"). For information about cache\n"
               "# directory tags see https://bford.info/cachedir/\n"
               f"{_MARKER_FORMAT} {FORMAT}\n")
# What a cache made before the tag holds: its key, its folders, a key being written.
_LEGACY_NAMES = frozenset({SEAL_FILE, "kernels", "modules", "locks", "tmp", "tune"})
_META_LIMIT = 64 << 20           # bytes; a bigger meta.json is damage, not a kernel
_FILE_LIMIT = 2 << 30
_WARNED: set[str] = set()        # folders already warned about in this process
_O_SAFE = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) \
    if hasattr(os, "O_NOFOLLOW") else 0


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _warn(message: str) -> None:
    """A RuntimeWarning attributed to the first caller outside tilelang (the user's line)."""
    import sys
    level, f = 1, sys._getframe(0)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE + os.sep):
        f, level = f.f_back, level + 1
    warnings.warn(message, RuntimeWarning, stacklevel=level)


def reset_stats() -> None:
    for k in STATS:
        STATS[k] = 0
    _WARNED.clear()


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


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Kernel artifacts as JSON

def artifact_to_json(a: KernelArtifact) -> dict:
    attrs = dataclasses.asdict(a.attrs) if dataclasses.is_dataclass(a.attrs) else None
    return {"name": a.name, "params": [p.to_json() for p in a.params], "block": list(a.block),
            "attrs": attrs, "cluster": list(a.cluster) if a.cluster else None,
            "static_smem": a.static_smem, "dynamic_smem": a.dynamic_smem,
            "facts": {k: v.key() for k, v in a.facts.items()},
            "nonportable_cluster": a.nonportable_cluster,
            "tensor_maps": [m.to_json() for m in a.tensor_maps]}


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
        nonportable_cluster=bool(d["nonportable_cluster"]),
        tensor_maps=tuple(TensorMapSpec.from_json(m) for m in d.get("tensor_maps", ())))


# ---------------------------------------------------------------------------------------------
# Files and folders that must be ours

class Damaged(Exception):
    """An entry that fails a check: treated as a miss."""


def _euid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def folder_problem(st: os.stat_result) -> str | None:
    """Why a folder (its lstat) cannot hold a private cache (`is ...`), or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    uid = _euid()
    if uid is not None and st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by you (uid {uid})"
    if st.st_mode & 0o022:
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _ours(st: os.stat_result) -> bool:
    uid = _euid()
    return uid is None or st.st_uid == uid


def marker_ok(root: str) -> bool:
    """`root` holds a Tile cache's tag: a regular file of ours, not writable by others, that
    starts with the tag's signature and names a format."""
    try:
        st = os.lstat(os.path.join(root, MARKER))
        if not stat.S_ISREG(st.st_mode) or not _ours(st) or st.st_mode & 0o022 or \
                st.st_size > 4096:
            return False
        text = _read_regular(os.path.join(root, MARKER), 4096).decode("utf-8")
    except (OSError, Damaged, UnicodeDecodeError):
        return False
    lines = text.splitlines()
    return bool(lines) and lines[0] == _TAG_SIGNATURE and any(
        ln.startswith(_MARKER_FORMAT) and ln[len(_MARKER_FORMAT):].strip().isdigit()
        for ln in lines[1:])


def _legacy_or_empty(root: str) -> str | None:
    """"empty", "legacy" (a cache made before the tag: only the cache's own names, and a key
    of ours), or None (anything else: a folder that is not a Tile cache)."""
    try:                # our temporary files (a key or a tag being written) do not count
        names = [n for n in os.listdir(root)
                 if not n.startswith((".seal.", f".{MARKER}.", f".{SEAL_FILE}."))]
    except OSError:
        return None
    if not names:
        return "empty"
    if not all(n in _LEGACY_NAMES for n in names):
        return None
    try:
        st = os.lstat(os.path.join(root, SEAL_FILE))
    except OSError:
        return None
    return "legacy" if stat.S_ISREG(st.st_mode) and _ours(st) else None


def not_a_cache(root: str) -> str | None:
    """Why the existing folder `root` is not a Tile cache (`is ...`), or None when it is one
    (its tag, or a cache from before the tag) or is empty."""
    if marker_ok(root) or _legacy_or_empty(root) is not None:
        return None
    return (f"is not a Tile kernel cache (it has no {MARKER} written by Tile, and it holds "
            "other files)")


def _read_regular(path: str, limit: int, size: int | None = None) -> bytes:
    """The bytes of `path`, which must be a regular file (never followed through a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_SAFE)
    except OSError as e:
        if e.errno == errno.ENOENT:
            raise Damaged(f"{os.path.basename(path)} is missing") from None
        raise Damaged(f"cannot open {os.path.basename(path)} ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Damaged(f"{os.path.basename(path)} is not a regular file")
        if st.st_size > limit or (size is not None and st.st_size != size):
            raise Damaged(f"{os.path.basename(path)} has the wrong size")
        chunks = []
        left = st.st_size
        while left > 0:
            b = os.read(fd, min(left, 1 << 24))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if size is not None and len(data) != size:
            raise Damaged(f"{os.path.basename(path)} is truncated")
        return data
    except OSError as e:
        raise Damaged(f"cannot read {os.path.basename(path)} ({e.strerror})") from None
    finally:
        os.close(fd)


def read_sealed_record(path: str, limit: int, fmt: int, key: str, field: str, what: str,
                       seal) -> str:
    """The sealed text `field` of a one-file JSON record {format, key, <field>, sha256, seal}
    (a module signature, a tuning result). `seal(sha)` is the expected seal, or None without
    a seal key. Anything else is `Damaged`."""
    try:
        d = json.loads(_read_regular(path, limit))
    except (ValueError, RecursionError):
        raise Damaged("not valid JSON") from None
    if not isinstance(d, dict) or d.get("format") != fmt or d.get("key") != key \
            or not isinstance(d.get(field), str):
        raise Damaged(f"not {what} of this key")
    sha = sha256_hex(d[field])
    expected = seal(sha)
    if d.get("sha256") != sha or expected is None or not isinstance(d.get("seal"), str) \
            or not hmac.compare_digest(d["seal"], expected):
        raise Damaged("checksum or seal mismatch")
    return d[field]


def _write_new(path: str, data: bytes) -> None:
    """Create `path` (which must not exist) 0600 with `data`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_SAFE, 0o600)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_ours(path: str) -> bool:
    """Remove `path` if it is ours: a link or file is unlinked (never followed), a folder is
    removed with everything in it that is ours. True when it is gone."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not _ours(st):
        return False
    if stat.S_ISDIR(st.st_mode):
        ok = True
        try:
            if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:   # ours but closed: open it
                os.chmod(path, 0o700)
            names = os.listdir(path)
        except OSError:
            return False
        for n in names:
            ok = _unlink_ours(os.path.join(path, n)) and ok
        if ok:
            with contextlib.suppress(OSError):
                os.rmdir(path)
                return True
        return False
    with contextlib.suppress(OSError):
        os.unlink(path)
        return True
    return False


def _tree_size(root: str) -> int:
    """Bytes of the regular files under `root` (links are not followed)."""
    total = 0
    try:
        st = os.lstat(root)
    except OSError:
        return 0
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    if not stat.S_ISDIR(st.st_mode):
        return 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for n in names:
        total += _tree_size(os.path.join(root, n))
    return total


# ---------------------------------------------------------------------------------------------

class DiskCache:
    def __init__(self, root: str | None = None):
        self.root = os.path.abspath(root or cache_dir())
        self._secret: bytes | None = None

    # -- the private folders ------------------------------------------------------------------
    def _refuse(self, folder: str, why: str) -> None:
        if folder in _WARNED:
            return
        _WARNED.add(folder)
        _warn(f"tilelang: not using the kernel cache in {self.root}: `{folder}` {why}; "
              "compiling without it (remove that folder, or point TILELANG_CACHE_DIR at a "
              "folder of your own)")

    def _cannot(self, folder: str, e: OSError) -> None:
        if folder in _WARNED:
            return
        _WARNED.add(folder)
        _warn(f"tilelang: cannot use the kernel cache in {self.root} ({folder}: "
              f"{e.strerror or e}); compiling without it")

    def _mkdir(self, path: str) -> None:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)        # mkdir's mode is masked by the umask

    def root_ok(self, create: bool) -> bool:
        """The root exists (made if `create`), is private and is a Tile cache; warns once when
        it is not. A new root gets the cache's tag; so does an empty folder or a cache made
        before the tag, when `create`. Any other folder is never used, chmodded or cleared."""
        try:
            try:
                st = os.lstat(self.root)
            except FileNotFoundError:
                if not create:
                    return False
                os.makedirs(os.path.dirname(self.root), exist_ok=True)
                with contextlib.suppress(FileExistsError):
                    self._mkdir(self.root)
                st = os.lstat(self.root)
        except OSError as e:
            self._cannot(self.root, e)
            return False
        why = folder_problem(st)
        if why:
            self._refuse(self.root, why)
            return False
        if not self._tagged(create):
            return False
        if stat.S_IMODE(st.st_mode) & 0o077:       # readable by others: the key is in here
            with contextlib.suppress(OSError):
                os.chmod(self.root, 0o700)
        return True

    def _tagged(self, create: bool) -> bool:
        """The root is a Tile cache: it has the tag, or gets it (when `create`) as an empty
        folder or a cache from before the tag; anything else is refused (one warning)."""
        if marker_ok(self.root):
            return True
        kind = _legacy_or_empty(self.root)
        if kind is None:
            if self.root not in _WARNED:
                _WARNED.add(self.root)
                _warn(f"tilelang: not using {self.root} as the kernel cache: it is not a Tile "
                      f"kernel cache (it has no {MARKER} written by Tile, and it holds other "
                      "files); compiling without a cache (point TILELANG_CACHE_DIR at a new or "
                      "empty folder)")
            return False
        if not create:
            return kind == "legacy"
        with contextlib.suppress(OSError):
            replace_file(os.path.join(self.root, MARKER), MARKER_TEXT.encode("utf-8"),
                         mode=0o600, exact_mode=True, replace=False)
        return marker_ok(self.root)

    def _folder(self, *parts: str, create: bool) -> str | None:
        """root/parts... as private folders (made if `create`), or None. A file or link of
        ours where a folder belongs is removed and, when creating, replaced."""
        if not self.root_ok(create):
            return None
        path = self.root
        for part in parts:
            path = os.path.join(path, part)
            try:
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    if not create:
                        return None
                    with contextlib.suppress(FileExistsError):
                        self._mkdir(path)
                    st = os.lstat(path)
                if not stat.S_ISDIR(st.st_mode) and _ours(st):
                    os.unlink(path)                 # our file or link: repair
                    if not create:
                        return None
                    self._mkdir(path)
                    st = os.lstat(path)
            except OSError as e:
                self._cannot(path, e)
                return None
            why = folder_problem(st)
            if why:
                self._refuse(path, why)
                return None
        return path

    def _key(self, create: bool) -> bytes | None:
        """This cache's secret (made on first use), or None."""
        if self._secret is not None:
            return self._secret
        path = os.path.join(self.root, SEAL_FILE)
        for _ in range(3):
            try:
                fd = os.open(path, os.O_RDONLY | _O_SAFE)
            except FileNotFoundError:
                if not create:
                    return None
                self._new_key(path)
                continue
            except OSError:
                fd = None
            if fd is not None:
                try:
                    st = os.fstat(fd)
                    good = stat.S_ISREG(st.st_mode) and _ours(st) and \
                        not stat.S_IMODE(st.st_mode) & 0o077 and st.st_size == 32
                    data = os.read(fd, 32) if good else b""
                finally:
                    os.close(fd)
                if len(data) == 32:
                    self._secret = data
                    return data
            if not create or not _unlink_ours(path):   # a bad key: entries sealed with it go
                return None
        return None

    def _new_key(self, path: str) -> None:
        """A new secret at `path`, unless another process made one first (theirs stays)."""
        with contextlib.suppress(OSError):
            replace_file(path, secrets.token_bytes(32), mode=0o600, exact_mode=True,
                         fsync=True, replace=False)

    def _seal(self, secret: bytes, key: str, body_sha: str) -> str:
        return hmac.new(secret, f"tilelang-cache-{FORMAT}\n{key}\n{body_sha}".encode(),
                        hashlib.sha256).hexdigest()

    # -- paths ------------------------------------------------------------------------------
    def _kernel_dir(self, key: str) -> str:
        return os.path.join(self.root, "kernels", key[:2], key)

    def _module_file(self, key: str) -> str:
        return os.path.join(self.root, "modules", key[:2], key + ".json")

    @staticmethod
    def _valid_key(key: str) -> bool:
        return isinstance(key, str) and len(key) >= 8 and all(c in "0123456789abcdef"
                                                              for c in key)

    # -- kernels ----------------------------------------------------------------------------
    def _read_entry(self, key: str, d: str, secret: bytes | None) -> tuple[dict, dict]:
        """(meta body, artifact bytes by name) of the entry folder `d`, fully verified."""
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            raise Damaged("missing") from None
        except OSError as e:
            raise Damaged(e.strerror) from None
        why = folder_problem(st)
        if why:
            raise Damaged(f"the entry folder {why}")
        try:
            meta = json.loads(_read_regular(os.path.join(d, "meta.json"), _META_LIMIT))
        except (ValueError, RecursionError):
            raise Damaged("meta.json is not valid JSON") from None
        if not isinstance(meta, dict):
            raise Damaged("meta.json is not an object")
        if meta.get("format") != FORMAT:
            raise Damaged("meta.json has another format")
        if meta.get("key") != key:
            raise Damaged("meta.json belongs to another key")
        body = meta.get("body")
        if not isinstance(body, dict):
            raise Damaged("meta.json has no body")
        body_sha = sha256_hex(_canonical(body))
        if meta.get("body_sha256") != body_sha:
            raise Damaged("meta.json's body does not match its checksum")
        seal = meta.get("seal")
        if secret is None or not isinstance(seal, str) or \
                not hmac.compare_digest(seal, self._seal(secret, key, body_sha)):
            raise Damaged("meta.json is not sealed by this cache")
        files = body.get("files")
        if not isinstance(files, dict) or "kernel.ptx" not in files or \
                not set(files) <= set(ARTIFACTS):
            raise Damaged("meta.json lists the wrong files")
        data = {}
        for name, rec in files.items():
            if not isinstance(rec, dict) or not isinstance(rec.get("bytes"), int):
                raise Damaged(f"meta.json's record of {name} is damaged")
            blob = _read_regular(os.path.join(d, name), _FILE_LIMIT, rec["bytes"])
            if sha256_hex(blob) != rec.get("sha256"):
                raise Damaged(f"{name} does not match its checksum")
            data[name] = blob
        return body, data

    def load(self, key: str) -> Built | None:
        """The entry for `key`, or None when there is none or it fails a check (then it is
        removed, if it is ours, and the caller rebuilds it)."""
        if not self._valid_key(key) or self._folder("kernels", key[:2], create=False) is None:
            return None
        d = self._kernel_dir(key)
        try:
            os.lstat(d)
        except OSError:
            return None
        try:
            body, data = self._read_entry(key, d, self._key(create=False))
            try:
                built = Built(artifact_from_json(body["artifact"]),
                              data["kernel.ptx"].decode("utf-8"), data.get("kernel.cubin"),
                              body["target"])
            except Exception as e:     # any shape of bad JSON is damage, never a crash
                raise Damaged(f"meta.json's artifact is damaged ({type(e).__name__})") from None
            if not isinstance(built.target, str):
                raise Damaged("meta.json's target is damaged")
            why = artifact_problem(built.artifact, built.target)
            if why:
                raise Damaged(f"meta.json's artifact has a bad {why}")
        except Damaged as e:
            STATS["corrupt"] += 1
            _warn(f"tilelang: damaged cache entry {d} ({e}); rebuilding it")
            self._remove(d)
            return None
        STATS["disk_hits"] += 1
        return built

    def store(self, key: str, built: Built, info: dict) -> None:
        """Write the entry atomically; if another process got there first, keep theirs."""
        if not self._valid_key(key):
            return
        shard = self._folder("kernels", key[:2], create=True)
        tmp_root = self._folder("tmp", create=True)
        secret = self._key(create=True) if shard and tmp_root else None
        if secret is None:
            return
        final = self._kernel_dir(key)
        tmp = tempfile.mkdtemp(prefix=key[:16] + ".", dir=tmp_root)
        try:
            files = {"kernel.ptx": built.ptx.encode("utf-8")}
            if built.cubin is not None:
                files["kernel.cubin"] = bytes(built.cubin)
            for name, blob in files.items():
                _write_new(os.path.join(tmp, name), blob)
            body = json.loads(_canonical({
                **info, "target": built.target, "artifact": artifact_to_json(built.artifact),
                "files": {n: {"bytes": len(b), "sha256": sha256_hex(b)}
                          for n, b in files.items()},
                "created": time.time()}))
            body_sha = sha256_hex(_canonical(body))
            meta = {"format": FORMAT, "key": key, "body": body, "body_sha256": body_sha,
                    "seal": self._seal(secret, key, body_sha)}
            _write_new(os.path.join(tmp, "meta.json"),
                       json.dumps(meta, indent=1, sort_keys=True).encode("utf-8"))
            for attempt in range(2):
                try:
                    os.rename(tmp, final)
                    tmp = None
                    STATS["disk_writes"] += 1
                    break
                except OSError:
                    # Something is there: a concurrent writer's entry (keep it) or a damaged
                    # one, a file or a link (replace it, if it is ours).
                    if attempt or self._entry_ok(key, final, secret) or \
                            not self._remove(final):
                        break
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def _entry_ok(self, key: str, d: str, secret: bytes) -> bool:
        try:
            self._read_entry(key, d, secret)
            return True
        except Damaged:
            return False

    def _remove(self, d: str) -> bool:
        """Move a folder of ours aside, then delete it, so a reader never sees half a folder
        under the final name; a file or link of ours is unlinked. True when it is gone."""
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        if not _ours(st):
            return False
        if not stat.S_ISDIR(st.st_mode):
            return _unlink_ours(d)
        tmp_root = self._folder("tmp", create=True)
        if tmp_root is None:
            return False
        trash = os.path.join(tmp_root, f"trash.{os.path.basename(d)}.{os.getpid()}."
                             f"{time.monotonic_ns()}")
        try:
            os.rename(d, trash)
        except OSError:
            return False
        _unlink_ours(trash)
        return True

    @contextlib.contextmanager
    def lock(self, key: str, timeout: float = 600.0) -> Iterator[None]:
        """Hold the build lock of `key` (an flock). Without a usable lock file (no flock, an
        unsafe folder, a lock that is not a regular file) the build goes ahead unlocked."""
        try:
            import fcntl
        except ImportError:          # pragma: no cover - not POSIX
            yield
            return
        d = self._folder("locks", create=True) if self._valid_key(key) else None
        fd = None
        if d is not None:
            with contextlib.suppress(OSError):
                fd = os.open(os.path.join(d, key + ".lock"),
                             os.O_RDWR | os.O_CREAT | _O_SAFE, 0o600)
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    fd = None
        if fd is None:
            yield
            return
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
                except OSError:
                    break
            yield
        finally:
            os.close(fd)             # closing releases the lock

    # -- module signatures ------------------------------------------------------------------
    def load_module(self, key: str, main_path: str) -> ModuleInfo | None:
        if not self._valid_key(key) or self._folder("modules", key[:2], create=False) is None:
            return None
        path = self._module_file(key)
        try:
            os.lstat(path)
        except OSError:
            return None
        try:
            secret = self._key(create=False)
            text = read_sealed_record(
                path, _META_LIMIT, FORMAT, key, "info", "a module signature",
                lambda sha: self._seal(secret, key, sha) if secret is not None else None)
            try:
                info = ModuleInfo.from_json(text)
            except Exception as e:
                raise Damaged(f"damaged signature ({type(e).__name__})") from None
        except Damaged:
            STATS["corrupt"] += 1
            _unlink_ours(path)
            return None
        for p, sha in info.sources:      # an imported file changed: the signature is stale
            if p == main_path:
                continue
            try:    # never blocks on a FIFO put in a module's place (tilelang/infile.py)
                if sha256_hex(read_regular(p)) != sha:
                    return None
            except OSError:
                return None
        STATS["module_disk_hits"] += 1
        return info

    def store_module(self, key: str, info: ModuleInfo) -> None:
        if not self._valid_key(key):
            return
        shard = self._folder("modules", key[:2], create=True)
        secret = self._key(create=True) if shard else None
        if secret is None:
            return
        text = info.to_json()
        sha = sha256_hex(text)
        data = json.dumps({"format": FORMAT, "key": key, "sha256": sha,
                           "seal": self._seal(secret, key, sha), "info": text})
        self.write_record(self._module_file(key), data.encode("utf-8"))

    def write_record(self, path: str, data: bytes, fsync: bool = False) -> bool:
        """Write the one-file record `path` (0600) atomically, in a private folder of this
        cache; something of ours that is not a regular file there (a folder, a link) is
        removed first. False when it cannot be written."""
        for attempt in range(2):
            try:
                return replace_file(path, data, mode=0o600, exact_mode=True, fsync=fsync,
                                    owner_only=True)
            except NotAFile:
                if attempt or not self._remove(path):
                    return False
            except OSError:
                return False
        return False

    # -- maintenance (tilec cache) ----------------------------------------------------------
    def problem(self) -> str | None:
        """Why the root cannot be used (None when it can, or does not exist): it is not
        private, or not a Tile cache."""
        try:
            st = os.lstat(self.root)
        except FileNotFoundError:
            return None
        except OSError as e:
            return f"cannot be examined ({e.strerror})"
        return folder_problem(st) or not_a_cache(self.root)

    def entries(self) -> list[dict]:
        """Every kernel entry, verified: each has `ok` and, when not ok, `problem`."""
        out: list[dict] = []
        base = os.path.join(self.root, "kernels")
        if self.problem() is not None or not _is_dir(base):
            return out
        secret = self._key(create=False)
        for sub in _listdir(base):
            shard = os.path.join(base, sub)
            if not _is_dir(shard):
                out.append(_bad_entry(sub, shard, "not a folder"))
                continue
            for key in _listdir(shard):
                d = os.path.join(shard, key)
                try:
                    body, _ = self._read_entry(key, d, secret)
                except Damaged as e:
                    out.append(_bad_entry(key, d, str(e)))
                    continue
                consts, facts = body.get("consts"), body.get("facts")
                out.append({"key": key, "path": d, "bytes": _tree_size(d), "ok": True,
                            "problem": None, "kernel": str(body.get("kernel", "?")),
                            "source": str(body.get("source", "?")),
                            "target": str(body.get("target", "?")),
                            "consts": consts if isinstance(consts, dict) else {},
                            "facts": facts if isinstance(facts, dict) else {},
                            "created": body.get("created")})
        return out

    def size(self) -> int:
        return _tree_size(self.root) if self.problem() is None else 0

    def clear(self) -> int:
        """Remove every entry that is ours (links are removed, never followed); returns the
        number of kernel entries removed."""
        if self.problem() is not None:
            return 0
        n = 0
        base = os.path.join(self.root, "kernels")
        if _is_dir(base):
            for sub in _listdir(base):
                shard = os.path.join(base, sub)
                if not _is_dir(shard):
                    continue
                for key in _listdir(shard):
                    n += _unlink_ours(os.path.join(shard, key))
        for sub in ("kernels", "modules", "tune", "tmp", "locks"):   # tune: tilelang.tune
            _unlink_ours(os.path.join(self.root, sub))
        return n


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _bad_entry(key: str, path: str, why: str) -> dict:
    return {"key": key, "path": path, "bytes": _tree_size(path), "ok": False, "problem": why,
            "kernel": "?", "source": "?", "target": "?", "consts": {}, "facts": {},
            "created": None}
