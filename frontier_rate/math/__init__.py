"""The math: change-rate estimators, the Whittle index / Lagrangian threshold, change patterns, HTTP dates,
the trust rules for sitemaps, feeds and pushes. Imports nothing of frontier_rate outside ``math``; no Redis, no I/O."""
