"""The runtime's gate: identifying an agent CLI and reading its version, the preflight, the
spawn that runs exactly the file checked, and the verdict rule they share."""
