"""Tile frontend stage."""
