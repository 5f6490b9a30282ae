"""Counts over a public hierarchy of areas and census tables: mechanisms, export, figures."""
