"""The point mechanisms, one module each (:mod:`dpcore.points.kind` lists them for the catalogue)."""
