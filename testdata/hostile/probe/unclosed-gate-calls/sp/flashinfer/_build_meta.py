__version__ = "0.6.16.post4"
