"""Moved to ``frontier_rate.detection.change_detection`` (issue 59: detection is a layer of its own); this
old path still imports, and each name used through it warns once with a DeprecationWarning
naming its new home."""

from frontier_rate import renamed
from frontier_rate.detection import change_detection as _moved

__all__ = _moved.__all__
__getattr__ = renamed.moved(__name__, _moved)
