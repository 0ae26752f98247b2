"""Both CLIs as a user or a script meets them: conventions, errors, output formats, exit
statuses, progress, the parity of their verify commands; the doctor and the canary."""
