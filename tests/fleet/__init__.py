"""The chain a fleet shares on PostgreSQL: appenders, the owner, the lock, outages and
deadlines, TLS, what a URL may show, hosts as witnesses and signers."""
