"""The O/D mechanisms (Boninsegna & Silvestri, PoPETs 2025) and their baselines: :mod:`.common`."""
