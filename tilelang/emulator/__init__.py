"""Tile emulator stage."""
