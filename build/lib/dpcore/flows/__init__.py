"""Origin/destination flows over public hierarchies: tree (public structure), counts (confidential),
mechanisms (InfTDA and its baselines: plan and release), accuracy (expected errors), diagnostics
(curator-only errors), export, figures."""
