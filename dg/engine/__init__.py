"""The serving engine: what runs a model for a client (runners, fair turns, live runs, kept runs, files)."""
