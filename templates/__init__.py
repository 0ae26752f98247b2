"""The jinja2 templates of the floor-map block, shipped inside floorctl (see floorctl.render)."""
