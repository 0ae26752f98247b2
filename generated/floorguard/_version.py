"""The distribution's version: the code's release, then (in a built wheel) the map's version.

``floorctl build`` rewrites ``__version__`` in the copy it builds from to
``RELEASE + "." + str(FLOOR_MAP_VERSION)`` (``0.2.0`` with map version 7: ``0.2.0.7``), so
that a newer map is always a higher PEP 440 version. hatchling reads ``__version__`` from
this file (``[tool.hatch.version]``); a checkout's editable install is ``RELEASE``.
"""

RELEASE = "0.2.0"
__version__ = RELEASE
