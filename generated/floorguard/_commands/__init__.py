"""Internal: the commands the runtime's command line (``python -m floorguard``) shares with
floorctl: the offline verify commands, the doctor, the canary, report formats."""
