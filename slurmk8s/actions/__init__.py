"""Use cases the CLI calls: each reads/writes files or talks to a cluster; no argument parsing here."""
