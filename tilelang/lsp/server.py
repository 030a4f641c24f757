"""The pygls server: handlers, document lookup, logging, and the command line."""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import stat
import sys
from typing import Iterable

from lsprotocol import types as lsp
from pygls.exceptions import (FeatureNotificationError, FeatureRequestError,
                              JsonRpcContentModified, JsonRpcException, JsonRpcInternalError,
                              JsonRpcInvalidParams)
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from tilelang.version import __version__

from . import editing, features, navigation, semantic
from .analysis import Analysis, MAX_CHECKED_CHARS
from .positions import UTF16
from .protocol import PARSE_ERROR, TileProtocol
from .scheduler import DEBOUNCE_S, Checker
from .sync import OutOfSync, apply_changes

log = logging.getLogger(__name__)

#: How long a request waits for the check of the document's current version before it is
#: answered from what needs no check (built-ins, keywords, dtypes).
REQUEST_WAIT_S = 0.5
#: The largest file a request about a document that is not open reads from disk.
MAX_READ_BYTES = 4 * MAX_CHECKED_CHARS


class TileServer(LanguageServer):
    checker: Checker | None = None

    def report_server_error(self, error: Exception, source) -> None:
        if source is JsonRpcException:  # from the read loop: the body is not JSON
            log.warning("unreadable message: %s: %s", type(error).__name__,
                        str(error).splitlines()[0][:200] if str(error) else "")
            self.protocol.reply_error(None, PARSE_ERROR, "parse error: the message body is "
                                      "not a JSON object in UTF-8")
            return
        if source is FeatureRequestError:  # the reply carries the error already
            return
        if source is FeatureNotificationError:  # e.g. didChange of a document not open
            log.warning("notification not applied: %s", str(error)[:300])
            return
        log.error("%s: %s", type(error).__name__, str(error)[:300])

    def get_checker(self) -> Checker:
        if self.checker is None:
            self.checker = Checker(asyncio.get_running_loop(), self._publish,
                                   lambda: position_encoding(self))
        return self.checker

    def _publish(self, uri: str, version: int | None, diags: list[lsp.Diagnostic]) -> None:
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=diags))


def position_encoding(ls: LanguageServer) -> str:
    try:
        enc = ls.workspace.position_encoding
    except RuntimeError:  # not initialized
        return UTF16
    enc = getattr(enc, "value", enc)
    return enc if enc in ("utf-8", "utf-16", "utf-32") else UTF16


def read_unopened(uri: str) -> str:
    """The text of a document the client did not open: a regular `file:` file, read without
    blocking on a FIFO or a device; anything else is an InvalidParams error."""
    if not isinstance(uri, str) or not uri.startswith("file:"):
        raise JsonRpcInvalidParams(f"document {uri!r} is not open (and not a file: URI)")
    try:
        path = to_fs_path(uri)
    except Exception:
        path = None
    if not path:
        raise JsonRpcInvalidParams(f"document {uri!r} is not open (and not a file: URI)")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise JsonRpcInvalidParams(f"document {uri!r} is not open and cannot be read: "
                                   f"{reason}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JsonRpcInvalidParams(f"document {uri!r} is not open and is not a regular file")
        if st.st_size > MAX_READ_BYTES:
            raise JsonRpcInvalidParams(f"document {uri!r} is not open and is too large to read "
                                       f"({st.st_size:,} bytes)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_READ_BYTES + 1)
    except OSError as e:
        raise JsonRpcInvalidParams(f"document {uri!r} is not open and cannot be read: "
                                   f"{e.strerror or e}") from None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def _guard(handler):
    """Any exception a handler raises becomes a one-line JSON-RPC error (pygls would attach a
    Python traceback to the response)."""
    @functools.wraps(handler)
    async def wrapped(ls, params):
        try:
            return await handler(ls, params)
        except (JsonRpcException, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug: the log file keeps its traceback, stderr one line
            log.error("%s failed: %s: %s", handler.__name__, type(exc).__name__, exc,
                      exc_info=True)
            raise JsonRpcInternalError(
                f"tilec lsp: {type(exc).__name__}: {str(exc)[:300]}") from None
    return wrapped


def _notification(handler):
    @functools.wraps(handler)
    def wrapped(ls, params):
        try:
            handler(ls, params)
        except Exception as exc:  # a notification has no reply: log one line
            log.error("%s failed: %s: %s", handler.__name__, type(exc).__name__, exc)
    return wrapped


def in_sync(ls: TileServer, uri: str) -> None:
    """Requests about a document whose copy is out of sync with the editor's (lsp/sync.py)
    are answered with ContentModified, never from the wrong text."""
    d = ls.get_checker().docs.get(uri)
    if d is not None and d.out_of_sync is not None:
        raise JsonRpcContentModified(
            f"tilec lsp: the server's copy of {uri} is out of sync with the editor's "
            f"({d.out_of_sync}); close and reopen the file to send its whole text again")


def lose_sync(ls: TileServer, uri: str, why: str) -> None:
    """An edit of `uri` could not be applied: say so once, and show no stale diagnostics."""
    if not ls.get_checker().lose_sync(uri, why):
        return
    log.warning("%s is out of sync with the editor: %s", uri, why)
    ls.window_show_message(lsp.ShowMessageParams(
        type=lsp.MessageType.Warning,
        message=f"tilec lsp: an edit of {uri} could not be applied ({why}); the server's "
                "copy no longer matches the editor's, so its diagnostics and answers stop "
                "until the file is closed and reopened (or its whole text is sent)"))
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


async def document(ls: TileServer, uri: str) -> Analysis:
    """The analysis of the document `uri`: the open one, else the file on disk."""
    in_sync(ls, uri)
    a = await ls.get_checker().current(uri, REQUEST_WAIT_S)
    in_sync(ls, uri)  # it may have lost sync while the check ran
    if a is not None:
        return a
    text = read_unopened(uri)
    return await ls.get_checker().once(uri, text, REQUEST_WAIT_S)


def _open_text(ls: TileServer, uri: str) -> str:
    return ls.workspace.get_text_document(uri).source


def create_server() -> TileServer:
    server = TileServer("tilec-lsp", __version__, protocol_cls=TileProtocol,
                        text_document_sync_kind=lsp.TextDocumentSyncKind.Full)
    server.protocol.on_unreadable_change = lambda uri, why: lose_sync(server, uri, why)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    @_notification
    def did_open(ls: TileServer, params: lsp.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.get_checker().update(doc.uri, _open_text(ls, doc.uri), doc.version, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    @_notification
    def did_change(ls: TileServer, params: lsp.DidChangeTextDocumentParams) -> None:
        doc = params.text_document
        checker = ls.get_checker()
        d = checker.docs.get(doc.uri)
        if d is None:
            return
        try:
            text = apply_changes(d.text if d.out_of_sync is None else None,
                                 params.content_changes, position_encoding(ls))
        except OutOfSync as e:
            lose_sync(ls, doc.uri, str(e))
            return
        checker.update(doc.uri, text, doc.version, 0 if checker.quiet(doc.uri) else DEBOUNCE_S)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    @_notification
    def did_save(ls: TileServer, params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        d = ls.get_checker().docs.get(uri)
        if d is not None and d.out_of_sync is None:  # imported files may have changed
            ls.get_checker().update(uri, d.text, d.version, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    @_notification
    def did_close(ls: TileServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.get_checker().close(params.text_document.uri)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=params.text_document.uri, diagnostics=[]))

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION,
                    lsp.CompletionOptions(trigger_characters=["@", "."]))
    @_guard
    async def completion(ls: TileServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        a = await document(ls, params.text_document.uri)
        return lsp.CompletionList(is_incomplete=False, items=features.completions(
            a, params.position, position_encoding(ls)))

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    @_guard
    async def hover(ls: TileServer, params: lsp.HoverParams) -> lsp.Hover | None:
        a = await document(ls, params.text_document.uri)
        return features.hover(a, params.position, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @_guard
    async def symbols(ls: TileServer,
                      params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        a = await document(ls, params.text_document.uri)
        return features.document_symbols(a, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    @_guard
    async def definition(ls: TileServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        a = await document(ls, params.text_document.uri)
        return features.definition(a, params.position, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
                    lsp.SignatureHelpOptions(trigger_characters=["(", ","],
                                             retrigger_characters=["="]))
    @_guard
    async def signature_help(ls: TileServer,
                             params: lsp.SignatureHelpParams) -> lsp.SignatureHelp | None:
        a = await _text_only(ls, params.text_document.uri)
        return editing.signature_help(a, params.position, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    @_guard
    async def references(ls: TileServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
        a = await document(ls, params.text_document.uri)
        include = params.context.include_declaration if params.context else True
        return navigation.references(a, params.position, include, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)
    @_guard
    async def highlights(ls: TileServer,
                         params: lsp.DocumentHighlightParams) -> list[lsp.DocumentHighlight]:
        a = await document(ls, params.text_document.uri)
        return navigation.highlights(a, params.position, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
    @_guard
    async def prepare_rename(ls: TileServer, params: lsp.PrepareRenameParams):
        a = await document(ls, params.text_document.uri)
        return navigation.prepare_rename(a, params.position, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_RENAME, lsp.RenameOptions(prepare_provider=True))
    @_guard
    async def rename(ls: TileServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
        a = await document(ls, params.text_document.uri)
        return navigation.rename(a, params.position, params.new_name, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, semantic.LEGEND)
    @_guard
    async def semantic_tokens(ls: TileServer,
                              params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
        a = await document(ls, params.text_document.uri)
        return semantic.semantic_tokens(a, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    @_guard
    async def inlay_hints(ls: TileServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        a = await document(ls, params.text_document.uri)
        return semantic.inlay_hints(a, params.range, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
    @_guard
    async def code_actions(ls: TileServer,
                           params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        a = await _text_only(ls, params.text_document.uri)
        return editing.code_actions(a, params, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    @_guard
    async def formatting(ls: TileServer,
                         params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
        a = await _text_only(ls, params.text_document.uri)
        return editing.formatting(a, position_encoding(ls))

    @server.feature(lsp.TEXT_DOCUMENT_FOLDING_RANGE)
    @_guard
    async def folding(ls: TileServer,
                      params: lsp.FoldingRangeParams) -> list[lsp.FoldingRange]:
        a = await _text_only(ls, params.text_document.uri)
        return editing.folding_ranges(a)

    return server


async def _text_only(ls: TileServer, uri: str) -> Analysis:
    """The document's current text, with the last check that parsed (for the names), without
    waiting for a check: what signature help, code actions, formatting and folding read."""
    in_sync(ls, uri)
    d = ls.get_checker().docs.get(uri)
    if d is None:
        return Analysis(uri, read_unopened(uri), checked=False)
    a = d.analysis if d.analysis is not None and d.analysis_gen == d.gen else None
    if a is not None:
        return a
    return Analysis(uri, d.text, checked=False, earlier_module=d.parsed,
                    earlier=d.parsed_analysis)


class _OneLine(logging.Formatter):
    """Log records without tracebacks: the client shows the server's stderr to the user."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(record.__dict__)
        # pygls puts tracebacks into some messages themselves: keep their first line
        record.msg, record.args = record.getMessage().split("\n", 1)[0], None
        record.exc_info = record.exc_text = record.stack_info = None
        return super().format(record)


#: pygls' own records of what this server logs one clear line about already (the reply to a
#: request it answered with an error, a body it could not read).
_REPEATS = ("Exception occurred for message", "Unable to deserialize message",
            "Unable to handle message")


def _is_repeat(record: logging.LogRecord) -> bool:
    return (record.name.startswith("pygls") and isinstance(record.msg, str)
            and record.msg.startswith(_REPEATS))


class _RepeatsOnOneLine(logging.Formatter):
    """The log file's format: tracebacks of this server's own failures (bugs) stay, while
    pygls' records of bad input this server answered and logged already (a request refused,
    a body that is not JSON-RPC) keep their first line only: expected input is no bug."""

    def format(self, record: logging.LogRecord) -> str:
        if _is_repeat(record):
            record = logging.makeLogRecord(record.__dict__)
            record.msg, record.args = record.getMessage().split("\n", 1)[0], None
            record.exc_info = record.exc_text = record.stack_info = None
        return super().format(record)


def _not_a_repeat(record: logging.LogRecord) -> bool:
    return not (record.name.startswith("pygls") and isinstance(record.msg, str)
                and record.msg.startswith(_REPEATS))


def _configure_logging(log_file: str | None) -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    if log_file:
        # a lone surrogate from a client's text must not make a log record fail to write
        handler: logging.Handler = logging.FileHandler(log_file, encoding="utf-8",
                                                       errors="backslashreplace")
        handler.setFormatter(_RepeatsOnOneLine("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.DEBUG)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_OneLine("tilec lsp: %(levelname)s: %(message)s"))
        handler.setLevel(logging.WARNING)
        handler.addFilter(_not_a_repeat)
        root.setLevel(logging.WARNING)
    root.addHandler(handler)

    def unraisable(u) -> None:  # e.g. a broken pipe while flushing at exit
        logging.getLogger(__name__).warning("ignored: %s: %s", type(u.exc_value).__name__,
                                            u.exc_value)
    sys.unraisablehook = unraisable


def _log_file_problem(path: str) -> str | None:
    """Why the log cannot go to `path` (a usage error), or None. A FIFO is refused too: opening
    it would wait for a reader before the server answers anything."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"the folder `{folder}` does not exist"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be examined ({e.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder"
    if stat.S_ISFIFO(st.st_mode):
        return "is a FIFO"
    return None


def serve(argv: Iterable[str] | None = None) -> int:
    """``tilec lsp``: serve over stdio (default) or TCP."""
    p = argparse.ArgumentParser(prog="tilec lsp", description="The Tile language server.")
    p.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (default)")
    p.add_argument("--tcp", action="store_true", help="serve over TCP")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2087)
    p.add_argument("--log-file", help="write the server's log here (with tracebacks)")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.log_file:
        why = _log_file_problem(args.log_file)
        if why:
            p.error(f"--log-file {args.log_file}: {why}")
    try:
        _configure_logging(args.log_file)
    except OSError as e:  # it changed since the check, or it cannot be opened
        p.error(f"--log-file {args.log_file}: cannot be written ({e.strerror or e})")
    server = create_server()
    try:
        if args.tcp:
            server.start_tcp(args.host, args.port)
        else:
            protocol_out = sys.stdout.buffer
            sys.stdout = sys.stderr  # a stray print() must not corrupt the protocol stream
            server.start_io(sys.stdin.buffer, protocol_out)
    except OSError as exc:  # the port is taken, stdin is closed
        sys.stderr.write(f"tilec lsp: {exc.strerror or exc}\n")
        return 1
    return 0
