"""Silver: canonical events, with quarantine and held exceptions, conserving every Bronze line."""
