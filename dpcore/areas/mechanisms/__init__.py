"""The mechanisms of the areas kinds, one module each."""
