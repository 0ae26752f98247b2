"""A closed world at the spawn: code a child would load besides what was judged (Python,
node, launchers, install layouts, other spellings), and how the gate reads a Python or node
child's command line, path and source."""
