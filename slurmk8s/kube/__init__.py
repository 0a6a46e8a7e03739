"""The cluster layer: the only package of slurmk8s that imports the `kubernetes` client.

Submodules that need the client import it themselves; `stages` and `labels` are pure so
the ordering and ownership rules can be read (and tested) without it.
"""
