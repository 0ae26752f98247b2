"""floorctl as a whole: its configuration, the files it reads and writes (atomic, never
through a link, never blocking), crash recovery, what it loads, attacks across commands."""
