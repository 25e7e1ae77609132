"""What leaves the registry: webhook deliveries (signed), their secrets, and the Atom feed."""
