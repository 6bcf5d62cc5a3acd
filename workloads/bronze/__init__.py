"""Bronze: each feed's deliveries landed as raw lines, exactly once, with manifests."""
