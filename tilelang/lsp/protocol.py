"""JSON-RPC that answers every request, whatever arrives.

pygls drops a request whose parameters do not deserialize (an invalid position, a missing
field) without a reply, drops requests after ``shutdown`` silently, runs requests before
``initialize`` into an internal error that carries a Python traceback, and ignores a body that
is not JSON. A client then waits forever. This protocol answers each of them with the JSON-RPC
error the specifications name, and logs one line.
"""

from __future__ import annotations

import logging
from typing import Any

from typing import Callable

from lsprotocol import types as lsp
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002


class Malformed:
    """A message pygls could not deserialize: answered with an error when it is a request."""

    def __init__(self, data: dict, error: BaseException, code: int | None = None):
        self.data = data
        self.error = error
        self.code = code  # the error code of the reply, when not the usual one

    @property
    def id(self):
        return valid_id(self.data.get("id"))

    @property
    def is_request(self) -> bool:
        return "id" in self.data and "method" in self.data


def valid_id(msg_id: Any):
    """The message id if JSON-RPC allows it (a string or an integer), else None."""
    if isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool)):
        return msg_id
    return None


def _describe(error: BaseException) -> str:
    cause = error.__cause__ or error
    text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    return text[:200]


def _change_uri(data: dict) -> str | None:
    params = data.get("params")
    doc = params.get("textDocument") if isinstance(params, dict) else None
    uri = doc.get("uri") if isinstance(doc, dict) else None
    return uri if isinstance(uri, str) else None


def _unreadable(data: dict, error: BaseException) -> str:
    """Why a didChange could not be read, for the user: a negative position, named, or the
    library's first line."""
    changes = data.get("params", {}).get("contentChanges")
    for k, ch in enumerate(changes if isinstance(changes, list) else []):
        rng = ch.get("range") if isinstance(ch, dict) else None
        for end in ("start", "end"):
            pos = rng.get(end) if isinstance(rng, dict) else None
            if isinstance(pos, dict) and any(isinstance(v, int) and v < 0
                                             for v in pos.values()):
                return (f"edit {k + 1} has a negative {end} (line {pos.get('line')}, "
                        f"character {pos.get('character')})")
    return f"an edit the server could not read ({_describe(error)})"


class TileProtocol(LanguageServerProtocol):
    #: Called with (uri, why) when a didChange of an open document cannot be read (a negative
    #: position, a field of the wrong type): the server's copy has missed an edit.
    on_unreadable_change: Callable[[str, str], None] | None = None

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        """The open documents' texts are the checker's, which the server's handler updates
        (lsp/sync.py); pygls' workspace copy is left alone: with Full sync it would take a
        ranged edit's text for the whole document."""
        if (handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    def structure_message(self, data: dict[str, Any]):
        try:
            message = super().structure_message(data)
        except Exception as exc:  # pygls raises InvalidParams/InternalError from json.loads
            return Malformed(data, exc)
        if "jsonrpc" in data and "id" in data and "method" in data and \
                not hasattr(message, "id"):
            # a notification's method sent as a request: pygls would drop the id, and the
            # client would wait for a reply forever
            return Malformed(data, ValueError(f"{data['method']} is a notification, not a "
                                              f"request"), INVALID_REQUEST)
        return message

    def reply_error(self, msg_id, code: int, message: str) -> None:
        """Send an error response; `msg_id` None is sent as ``"id": null`` as JSON-RPC asks."""
        self._send_data({"jsonrpc": "2.0", "id": valid_id(msg_id),
                         "error": {"code": code, "message": message}})

    def handle_message(self, message) -> None:
        if isinstance(message, Malformed) and message.is_request:
            method = message.data.get("method")
            if self._shutdown:
                self.reply_error(message.data.get("id"), INVALID_REQUEST,
                                 "the server is shut down")
                return
            if self._workspace is None and method != lsp.INITIALIZE:
                self.reply_error(message.data.get("id"), SERVER_NOT_INITIALIZED,
                                 f"{method}: the server is not initialized yet")
                return
        if isinstance(message, Malformed):
            method = message.data.get("method")
            if message.is_request:
                bad_method = not isinstance(method, str)
                log.warning("malformed request %r: %s", method, _describe(message.error))
                if message.code is not None:
                    self.reply_error(message.data.get("id"), message.code,
                                     _describe(message.error))
                    return
                self.reply_error(message.data.get("id"),
                                 INVALID_REQUEST if bad_method or message.id is None
                                 else INVALID_PARAMS,
                                 f"invalid {'request' if bad_method else 'parameters of ' + method}"
                                 f": {_describe(message.error)}")
            elif "method" not in message.data and "id" not in message.data:
                self.reply_error(None, INVALID_REQUEST, "not a JSON-RPC message")
            else:
                log.warning("malformed notification %r ignored: %s", method,
                            _describe(message.error))
                uri = _change_uri(message.data)
                if method == lsp.TEXT_DOCUMENT_DID_CHANGE and uri is not None and \
                        self.on_unreadable_change is not None and self._workspace is not None \
                        and uri in self._workspace.text_documents:
                    self.on_unreadable_change(uri, _unreadable(message.data, message.error))
            return
        if not hasattr(message, "jsonrpc"):
            # valid JSON that is no JSON-RPC message: a number, a list, an object without
            # "jsonrpc" (LSP has no batches)
            msg_id = message.get("id") if isinstance(message, dict) else None
            log.warning("not a JSON-RPC 2.0 message: %.80r", message)
            self.reply_error(msg_id, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
            return
        method = getattr(message, "method", None)
        is_request = method is not None and hasattr(message, "id")
        if is_request and valid_id(message.id) is None:
            # an id that is no string or integer cannot be echoed back
            self.reply_error(None, INVALID_REQUEST, f"invalid request id {message.id!r:.40}")
            return
        if message.jsonrpc != self.VERSION:
            if is_request:
                self.reply_error(message.id, INVALID_REQUEST,
                                 f"unsupported JSON-RPC version {message.jsonrpc!r}")
            return
        if self._shutdown and method != lsp.EXIT:
            if is_request:
                self.reply_error(message.id, INVALID_REQUEST, "the server is shut down")
            return
        initialized = self._workspace is not None
        if method == lsp.INITIALIZE and initialized:
            self.reply_error(message.id, INVALID_REQUEST, "the server is already initialized")
            return
        if not initialized and method not in (lsp.INITIALIZE, lsp.EXIT, None):
            if is_request:
                self.reply_error(message.id, SERVER_NOT_INITIALIZED,
                                 f"{method}: the server is not initialized yet")
            return
        if method in (lsp.TEXT_DOCUMENT_DID_CHANGE, lsp.TEXT_DOCUMENT_DID_CLOSE):
            uri = message.params.text_document.uri
            if uri not in self._workspace.text_documents:
                log.warning("%s of a document that is not open ignored: %s", method, uri)
                return
        try:
            super().handle_message(message)
        except Exception as exc:  # pygls failed on a notification (requests are answered)
            log.warning("%s not handled: %s: %s", method or "message", type(exc).__name__,
                        _describe(exc))
