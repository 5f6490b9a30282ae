"""Every kind's Plan step leads its expected error with the same reading (UX review): ± for 19 of 20
counts, the plan's own 95 % half-width of the finest level."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui import fmt

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.mark.parametrize(("kind", "slot"), [("areas", "hier_plan"), ("flows", "od_plan")])
def test_the_plan_step_leads_with_the_error_for_19_of_20_counts(kind: str, slot: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.radio(key="_w_kind").set_value(kind).run()
    at.switch_page("pages/plan.py").run()
    assert not at.exception, at.exception
    kept = at.session_state[slot][1]
    core = kept[0] if kind == "areas" else kept[1]
    finest = core.rows[-1]
    [lead] = [m.value for m in at.markdown if "in 19 of 20" in m.value and "off by at most about" in m.value]
    assert f"± {fmt.num(finest.ci95)}" in lead
