"""JSON Schemas shipped inside floorctl (installed as ``floorctl._schemas``)."""
