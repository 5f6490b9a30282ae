"""A Streamlit session without a browser: Streamlit's own websocket protocol, for load tests.

Each :class:`ProtocolSession` opens ``/_stcore/stream`` as the browser does, asks for script runs
(``BackMsg.rerun_script``: the root URL, a page change by the page's script hash, a button's
trigger) and reads the server's ``ForwardMsg`` answers until the run has finished.  It costs the
machine almost nothing, so a load test on a small machine can put many sessions on the server
without the browsers taking the cores the server needs (issue 28 item 5).  What it measures is the
server's side of a step: from the request until the run that answers it has finished.
"""

from __future__ import annotations

import asyncio
import time

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg


class ProtocolSession:
    """One session on ``base`` (``http://host:port``), driven by script runs."""

    def __init__(self, base: str) -> None:
        self.url = base.replace("http://", "ws://") + "/_stcore/stream"
        self.ws = None
        self.pages: dict[str, str] = {}  # url path -> page script hash
        self.texts: list[str] = []  # text of the last run's elements
        self.buttons: dict[str, str] = {}  # label -> widget id, last run

    async def __aenter__(self) -> ProtocolSession:
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    async def run(self, *, page: str = "", trigger: str | None = None, until: str | None = None) -> float:
        """Ask for a run (page: url path, "" for the root; trigger: a button's label) and wait until a
        run has finished that shows ``until`` (any run when None).  Returns the seconds it took."""
        msg = BackMsg()
        msg.rerun_script.query_string = ""
        msg.rerun_script.page_script_hash = self.pages.get(page, "")
        if trigger is not None:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = self.buttons[trigger]
            w.trigger_value = True
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        seen = False
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(await self.ws.recv())
            kind = fm.WhichOneof("type")
            if kind == "new_session":
                self.texts, self.buttons = [], {}
            elif kind == "navigation":
                for p in fm.navigation.app_pages:
                    self.pages[p.url_pathname] = p.page_script_hash
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                self._note(fm.delta.new_element)
                seen = seen or (until is not None and until in self.texts[-1])
            elif kind == "script_finished" and (until is None or seen):
                return time.perf_counter() - t0

    def _note(self, el) -> None:
        which = el.WhichOneof("type")
        part = getattr(el, which)
        self.texts.append(" ".join(str(getattr(part, f, "")) for f in ("label", "body", "text")))
        if which == "button" and part.label:
            self.buttons[part.label] = part.id


async def walk(base: str) -> dict[str, float]:
    """The benchmark's path (demo points): the root URL (Data), Plan, Release, the Release button."""
    async with ProtocolSession(base) as s:
        out = {"data": await s.run(until="Rows read")}
        out["plan"] = await s.run(page="plan", until="Plan")
        out["release page"] = await s.run(page="release", until="Release with")
        label = next(b for b in s.buttons if b.startswith("Release with"))
        out["release"] = await s.run(page="release", trigger=label, until="Released ")
        return out


if __name__ == "__main__":  # one walk against a running server: python benchmarks/session_protocol.py URL
    import sys

    print(asyncio.run(walk(sys.argv[1])))
