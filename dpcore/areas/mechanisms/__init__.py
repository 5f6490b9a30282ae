"""The mechanisms of the areas kinds, one module each (:mod:`dpcore.areas.kind` registers them).

Kind ``hierarchy`` (counts over a public tree of areas; :mod:`.tree` is what they share):
:mod:`.exact`, :mod:`.topdown_linf`, :mod:`.topdown_l2`, :mod:`.hay`, :mod:`.matrix`,
:mod:`.bottom_up`, :mod:`.independent`, :mod:`.dpc_approx`.

Kind ``census`` (a census table over a public structure): :mod:`.census_privelet`,
:mod:`.census_matrix`.
"""
