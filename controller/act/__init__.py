"""Side effects. Every action is idempotent, gated by an explicit OPA allow where the contract
asks for one, logged with its reason, announced with a Kubernetes Event on each object it
touches, and skipped (printed instead) under --dry-run."""
