"""Advisory feeds: their schemas, signatures and trusted keys, fetching them, importing OSV
records into them, merging them."""
