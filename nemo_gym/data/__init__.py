"""NeMo Gym data sources."""
