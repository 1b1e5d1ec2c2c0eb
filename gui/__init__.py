"""tfdoctor desktop app (PySide6 + pyqtgraph) on top of tfdoctor.core."""
