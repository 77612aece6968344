"""NeMo Gym. Kept empty on purpose: this file is copied into the sandbox with the verifier SDK."""
