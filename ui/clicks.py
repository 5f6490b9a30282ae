"""Widget callbacks that run to their end: a click is never lost to another request (issue 28 item 5).

Streamlit 1.67 looks for a pending rerun request at every read or write of ``st.session_state`` and
at every element a script draws, also inside a widget's callback.  A request that reached the
server while a callback ran (a second click, a browser reconnecting after a busy spell, any other
widget) stops the callback there, as if it had called ``st.rerun()``
(``SessionState._run_callback_and_record_rerun``), and the click's trigger is not replayed: a
Release button's callback stopped before the charge released nothing, and the click was gone.
Under ten sessions at once such requests arrive during seconds-long callbacks.

:func:`atomic` wraps a callback so that requests arriving while it runs wait for its end (they are
kept by Streamlit, not dropped: ``ScriptRequests`` holds the pending rerun and the script handles it
at its next yield point after the callbacks, as for any request during a run).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from streamlit.runtime.scriptrunner import get_script_run_ctx

_HELD = threading.local()  # per script thread: how deep inside held sections this run is


def _no_request() -> None:
    """``ScriptRequests.on_scriptrunner_yield`` while held: no request is handed out (it stays pending)."""
    return None


@contextmanager
def held() -> Iterator[None]:
    """Inside the block, the script is not stopped by a rerun or stop request; a request that arrives
    meanwhile stays pending and is handled at the script's next yield point after the block.

    Outside a script run (a plain test, a thread) it does nothing."""
    ctx = get_script_run_ctx(suppress_warning=True)
    requests = getattr(ctx, "script_requests", None)
    depth = getattr(_HELD, "depth", 0)
    if requests is None or depth:
        _HELD.depth = depth + 1
        try:
            yield
        finally:
            _HELD.depth = depth
        return
    # the instance attribute shadows the method: Streamlit's yield check asks it and gets nothing,
    # while request_rerun (the server's thread) still records the request
    requests.on_scriptrunner_yield = _no_request
    _HELD.depth = 1
    try:
        yield
    finally:
        _HELD.depth = 0
        requests.__dict__.pop("on_scriptrunner_yield", None)


def atomic(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` run inside :func:`held`: use as ``st.button(..., on_click=atomic(fn), args=...)``.

    For callbacks that change what is kept (a release charged, an answer recorded, a cap raised): a
    request arriving meanwhile no longer stops them half-way.  Keep them short of waits on the
    browser (they cannot be interrupted, not even by the Stop button)."""
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        with held():
            return callback(*args, **kwargs)

    return run
