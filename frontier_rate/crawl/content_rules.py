"""Moved to ``frontier_rate.detection.content_rules`` (issue 59: detection is a layer of its own); this
old path still imports, and each name used through it warns once with a DeprecationWarning
naming its new home."""

from frontier_rate import renamed
from frontier_rate.detection import content_rules as _moved

__getattr__ = renamed.moved(__name__, _moved)
