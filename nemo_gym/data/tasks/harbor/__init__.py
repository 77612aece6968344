"""The host side of NeMo Gym's Harbor tasks: staging the verifier shim, running it, reading rewards."""
