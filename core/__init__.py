"""tfdoctor core: everything the CLI and the GUI share, free of Qt and of TensorFlow."""

__version__ = "0.1.0"
