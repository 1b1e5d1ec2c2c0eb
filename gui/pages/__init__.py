"""Pages of the main window (one per wizard step)."""
