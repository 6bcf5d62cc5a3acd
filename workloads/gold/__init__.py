"""Gold: daily entity features, W1 baselines, correlations and their entity index."""
