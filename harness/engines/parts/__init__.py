"""What engine kinds are made of: fact tables, /metrics profiles, serving-log patterns, flag maps,
HTTP probes, and the EngineKind Protocol. Not a kind: harness.engines registers only its own modules."""
