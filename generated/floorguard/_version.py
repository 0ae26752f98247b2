"""The distribution's version: the code's release, then (in a built wheel) the map's version.

``floorctl build`` rewrites ``__version__`` in the copy it builds from to
``RELEASE + "." + str(FLOOR_MAP_VERSION)``, so that a newer map is a higher PEP 440 version.
"""

RELEASE = "0.2.0"
__version__ = RELEASE
