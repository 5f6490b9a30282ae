"""The O/D mechanisms, one module each, reading like their papers: :mod:`.inftda` (the default),
:mod:`.tda_l2`, :mod:`.tda_linf_milp`, :mod:`.vanilla_gauss` and :mod:`.sh` (Boninsegna &
Silvestri, PoPETs 2025); the top-down walk they share is :mod:`.common`, the core interface
:mod:`.base`.  :mod:`dpcore.flows.kind` registers them in :mod:`dpcore.catalog`."""
