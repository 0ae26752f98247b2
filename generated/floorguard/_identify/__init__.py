"""Internal: what a child is and what it will run: the catalogue of agent CLIs, version
detection, identification of files and imports, and the closed-world examination of
Python and node command lines."""
