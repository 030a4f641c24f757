"""Tile interp stage."""
