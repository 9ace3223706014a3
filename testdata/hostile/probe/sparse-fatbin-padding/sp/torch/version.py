__version__ = "2.9.0"
cuda = "13.0"
