"""One module per floorctl command (or command group); ``floorctl.cli`` registers them."""
