"""Synthetic sample package for smpatch demos."""

from sglang.version import __version__
