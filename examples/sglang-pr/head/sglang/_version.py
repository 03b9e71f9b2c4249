__version__ = version = "0.0.0+synthetic"
