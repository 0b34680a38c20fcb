"""Seeded generation of the work: request classes, lengths, prompts, shared prefixes, arrivals."""
